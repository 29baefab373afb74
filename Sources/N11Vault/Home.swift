import N11System

/// Where n11archive keeps its state: `--home`, else `$N11_HOME`, else
/// `$XDG_DATA_HOME/n11archive`, else `~/.local/share/n11archive`.
public struct N11Home: Sendable {
    public let root: String

    public init(root: String) { self.root = Path.absolute(root) }

    public static func resolve(override: String?, environment: [String: String]) -> N11Home {
        if let override, !override.isEmpty { return N11Home(root: override) }
        if let home = environment["N11_HOME"], !home.isEmpty { return N11Home(root: home) }
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") { return N11Home(root: Path.join(xdg, "n11archive")) }
        let user = environment["HOME"] ?? "/"
        return N11Home(root: Path.join(user, ".local/share/n11archive"))
    }

    public var keyStorePath: String { Path.join(root, "keystore.n11keys") }
    public var defaultVaultPath: String { Path.join(root, "vault") }
    public var lockPath: String { Path.join(root, ".lock") }
}
