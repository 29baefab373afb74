import ArgumentParser
import N11Crypto
import N11Archiver
import N11System
import N11Vault

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the key store (vault, fade and backup keys, a signing key) and an empty vault.",
        discussion: """
        Examples:
          n11archive init
          n11archive init --pin                        # asks for a PIN twice
          n11archive init --pin --pin-file ~/.n11pin   # PIN from a 0600 file
        An existing key store is never replaced.
        """)

    @OptionGroup var store: StoreOptions
    @OptionGroup var vaultOptions: VaultOptions

    @Flag(help: "Seal the key store under a PIN of at least 8 characters (Argon2id, 256 MiB, 3 passes).")
    var pin = false

    func run() throws {
        let home = store.resolvedHome
        let vaultPath = vaultOptions.vault ?? home.defaultVaultPath
        // Check the vault's place before asking for a PIN or creating keys, so a failed init
        // costs nothing and leaves nothing behind.
        try HomeInitializer.check(vaultPath: vaultPath)
        var pinBytes: SecureBytes? = nil
        if pin {
            guard let source = store.pinSource else {
                throw CLIError(.usage, "--pin needs a terminal to ask for the PIN, or --pin-file/--pin-fd")
            }
            pinBytes = try source.read(what: "PIN", confirm: true, accept: { try KeyStore.checkPIN($0) })
        } else if store.pinFile != nil || store.pinFD != nil {
            throw CLIError(.usage, "--pin-file/--pin-fd given without --pin", hint: "add --pin to protect the key store with that PIN")
        }
        let report = try HomeInitializer.initialize(home, vaultPath: vaultPath, pin: pinBytes, lockWait: vaultOptions.lockWait)
        Console.out("initialised key store \(report.keyStorePath)\(report.isPINProtected ? " (PIN-protected)" : "")")
        Console.out("vault \(report.vaultPath)")
        if let signer = report.signer {
            Console.out("signing key \(SignerKeyFiles.fingerprint(signer)): every archive this home creates is signed with it")
            Console.note("to refuse archives it did not sign, trust it where you restore: `n11archive key trust --own` here, or `key export-public --signing` and `key trust FILE` elsewhere")
        }
    }
}
