import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11System
import N11Vault

/// Where the key store is and how to unlock it; shared by every command that needs keys.
struct StoreOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The n11archive home (key store and default vault).",
                               discussion: "Default: $N11_HOME, else $XDG_DATA_HOME/n11archive, else ~/.local/share/n11archive.",
                               valueName: "DIR"), completion: .directory)
    var home: String?

    @Option(name: .customLong("pin-file"),
            help: ArgumentHelp("Read the key store PIN from the first line of FILE ($N11_PIN_FILE also works).", valueName: "FILE"), completion: .file())
    var pinFile: String?

    @Option(name: .customLong("pin-fd"),
            help: ArgumentHelp("Read the key store PIN from file descriptor N.", valueName: "N"))
    var pinFD: Int32?

    var resolvedHome: N11Home {
        N11Home.resolve(override: home, environment: ProcessInfo.processInfo.environment)
    }

    var pinSource: SecretSource? {
        SecretSource.choose(file: pinFile, descriptor: pinFD, environmentFile: "N11_PIN_FILE")
    }

    /// Loads the key store, asking for the PIN only if it is sealed with one (and, without
    /// `prompting`, only from a file or descriptor, never on the terminal).
    func loadKeyStore(prompting: Bool = true) throws -> KeyStore {
        let home = resolvedHome
        return try KeyStore.load(from: home) {
            guard let source = pinSource else { return nil }
            if !prompting, case .terminal = source { return nil }
            return try source.read(what: "PIN")
        }
    }
}

/// Which vault to use and how long to wait for another process that is changing it.
struct VaultOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The vault directory (default: the home's vault).", valueName: "DIR"), completion: .directory)
    var vault: String?

    @Option(name: .customLong("lock-wait"),
            help: ArgumentHelp("Wait up to SECONDS for another n11archive using the vault.", valueName: "SECONDS"))
    var lockWait: Double = 0

    func validate() throws {
        guard lockWait >= 0 else { throw ValidationError("--lock-wait must be 0 or more seconds") }
    }

    /// Opens the vault; `keyStore` when the caller already loaded it (so a PIN is read once).
    func open(with store: StoreOptions, keyStore loaded: KeyStore? = nil, forWriting: Bool) throws -> Vault {
        let keyStore = try loaded ?? store.loadKeyStore()
        return try Vault.open(at: path(with: store), keyStore: keyStore, forWriting: forWriting, lockWait: lockWait)
    }

    func path(with store: StoreOptions) -> String { vault ?? store.resolvedHome.defaultVaultPath }
}

/// Which signers a command that reads archives trusts (DESIGN.md §8.4): `--signed-by` files,
/// else the home's trusted signers (`key trust`); `--no-signer-check` turns the rule off once.
struct SignerTrustOptions: ParsableArguments {
    @Option(name: .customLong("signed-by"),
            help: ArgumentHelp("Trust only archives signed by the Ed25519 keys in FILE, for this command (repeatable; default: the home's trusted signers, `key trust`).",
                               valueName: "FILE"), completion: .file())
    var signedBy: [String] = []

    @Flag(name: .customLong("no-signer-check"),
          help: "Turn the trusted-signer rule off for this command: read archives that are unsigned or signed by any key (prune then counts by records and passwords).")
    var noSignerCheck = false

    func validate() throws {
        if noSignerCheck && !signedBy.isEmpty { throw ValidationError("--signed-by and --no-signer-check exclude each other") }
    }

    func resolve(home: N11Home) throws -> SignerTrust {
        noSignerCheck ? .anySigner : try SignerTrust.resolve(signedBy: signedBy, home: home)
    }
}
