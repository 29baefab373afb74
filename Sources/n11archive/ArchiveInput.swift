import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11Vault

/// What every command that reads an archive shares: which archive, and how to unlock it.
struct ArchiveInput: ParsableArguments {
    @Argument(help: ArgumentHelp("The archive: a path, or REMOTE:PATH on an rclone remote.", valueName: "FILE"), completion: .file()) var file: String
    @Option(help: ArgumentHelp("Where a remote archive is fetched to first (default: HOME/spool, 0700).", valueName: "DIR"), completion: .directory)
    var spool: String?
    @OptionGroup var store: StoreOptions
    @OptionGroup var password: PasswordOptions
    @OptionGroup var identity: IdentityOptions
    @OptionGroup var kdfCeiling: KDFCeilingOptions

    /// Opens and authenticates the archive: identities (the key store's and `--identity`
    /// files) are tried on recipient slots first, then the password; secure archives load
    /// the key store. Pass a reader already opened to avoid opening the file twice.
    func unlock(_ opened: ArchiveReader? = nil, toleratingMissingItems: Bool = false) throws -> (UnlockedArchive, KeyStore?) {
        let reader = try opened ?? self.reader()
        var keyStore: KeyStore? = nil
        func loadStore() throws -> KeyStore {
            if let keyStore { return keyStore }
            let loaded = try store.loadKeyStore()
            keyStore = loaded
            return loaded
        }
        // No source at all (cron without a password file): nil, and the reader says what
        // would open the archive.
        let archive = try reader.unlock(password: {
            password.source == nil ? nil : try password.read(confirm: false, cost: reader.header.passwordKDFs.first)
        },
                                        keyStore: loadStore, identities: {
            // A machine without a key store has no identities of its own.
            let hasStore = ((try? FileStatus.of(store.resolvedHome.keyStorePath)) ?? nil) != nil
            return (hasStore ? try loadStore().identities : []) + (try identity.fromFiles())
        }, kdfCeiling: try kdfCeiling.ceiling(), toleratingMissingItems: toleratingMissingItems)
        return (archive, keyStore)
    }
}
