import ArgumentParser
import Foundation
import N11Crypto
import N11System
import N11Vault

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the key store (vault, fade and backup keys) and an empty vault.",
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
        try Vault.checkCanCreateOrOpen(at: vaultPath)
        var pinBytes: SecureBytes? = nil
        if pin {
            guard let source = store.pinSource else {
                throw CLIError(.usage, "--pin needs a terminal to ask for the PIN, or --pin-file/--pin-fd")
            }
            pinBytes = try source.read(what: "PIN", confirm: true, accept: { try KeyStore.checkPIN($0) })
        } else if store.pinFile != nil || store.pinFD != nil {
            throw CLIError(.usage, "--pin-file/--pin-fd given without --pin", hint: "add --pin to protect the key store with that PIN")
        }
        let homeExisted = ((try? FileStatus.of(home.root, followLinks: true)) ?? nil) != nil
        let keyStore = try KeyStore.create(in: home, pin: pinBytes)
        let vault: Vault
        do {
            vault = try Vault.open(at: vaultPath, keyStore: keyStore, forWriting: true, lockWait: vaultOptions.lockWait)
        } catch {
            // A vault that cannot be used (another key store's, locked): keep nothing of this run.
            try? FileManager.default.removeItem(atPath: homeExisted ? keyStore.path : home.root)
            throw error
        }
        Console.out("initialised key store \(keyStore.path)\(keyStore.isPINProtected ? " (PIN-protected)" : "")")
        Console.out("vault \(vault.path)")
    }
}
