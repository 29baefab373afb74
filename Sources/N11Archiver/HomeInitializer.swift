import N11Crypto
import N11System
import N11Vault

/// `init`: a new key store (vault, fade and backup keys, and the signing key of DESIGN.md
/// §8.4) and an empty vault, or nothing. The
/// key store is created holding the home's lock, so nobody starts using keys that a failed
/// init takes back; what this run created (and only that: never a recursive removal) is
/// taken back if the vault cannot be made, or on Ctrl-C.
public enum HomeInitializer {
    public struct Report: Sendable {
        public let keyStorePath: String
        public let isPINProtected: Bool
        public let vaultPath: String
        /// The public half of the home's new signing key (`key export-public --signing`).
        public let signer: Ed25519PublicKey?
    }

    /// Checks, before anything is asked or created, that a vault can be made at `vaultPath`.
    public static func check(vaultPath: String) throws(VaultError) {
        try Vault.checkCanCreateOrOpen(at: vaultPath)
    }

    public static func initialize(_ home: N11Home, vaultPath: String, pin: SecureBytes?, lockWait: Double) throws -> Report {
        let keyStore = try KeyStore.create(in: home, pin: pin, holdingLock: true, signing: true)
        defer { keyStore.releaseHomeLock() }
        let created = HomeTakeBack(keyStore: keyStore, createdKeyStore: true)
        let interrupted = Interruption.onInterrupt { created.takeBack() }
        defer { Interruption.cancel(interrupted) }
        do {
            let vault = try Vault.open(at: vaultPath, keyStore: keyStore, forWriting: true, lockWait: lockWait,
                                       claim: { created.vault = $0 })
            return Report(keyStorePath: keyStore.path, isPINProtected: keyStore.isPINProtected, vaultPath: vault.path,
                          signer: keyStore.signingKey?.publicKey)
        } catch {
            // A vault that cannot be used (another key store's, locked): keep nothing of this run.
            Interruption.critical { created.takeBack() }
            throw error
        }
    }
}

/// What a run created in a home, taken back when it fails or is interrupted: the vault if
/// this run created it (decided by the vault under its lock), then the key store if this run
/// created it and no vault of it is left. A vault or key store another process made
/// meanwhile is never touched, and nothing is removed recursively.
final class HomeTakeBack: @unchecked Sendable {
    let keyStore: KeyStore
    let createdKeyStore: Bool
    /// The vault once opened (`Vault.open`'s `claim`), until it is taken back.
    var vault: Vault?

    init(keyStore: KeyStore, createdKeyStore: Bool) {
        self.keyStore = keyStore
        self.createdKeyStore = createdKeyStore
    }

    func takeBack() {
        let vaultRemoved = vault.map { $0.isWritable && $0.removeIfCreated() } ?? true
        vault = nil
        if createdKeyStore && vaultRemoved { _ = keyStore.removeIfUnused() }
    }
}
