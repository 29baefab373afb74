import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11Vault

/// What every command that reads an archive shares: which archive, and how to unlock it.
struct ArchiveInput: ParsableArguments {
    @Argument(help: ArgumentHelp("The archive.", valueName: "FILE")) var file: String
    @OptionGroup var store: StoreOptions
    @OptionGroup var password: PasswordOptions
    @OptionGroup var kdfCeiling: KDFCeilingOptions

    /// Opens and authenticates the archive: portable ones ask for the password, secure ones
    /// load the key store. Pass a reader already opened to avoid opening the file twice.
    func unlock(_ opened: ArchiveReader? = nil) throws -> (UnlockedArchive, KeyStore?) {
        let reader = try opened ?? ArchiveReader(path: file)
        var keyStore: KeyStore? = nil
        let archive = try reader.unlock(password: { try password.read(confirm: false, cost: reader.header.kdf) }, keyStore: {
            let loaded = try store.loadKeyStore()
            keyStore = loaded
            return loaded
        }, kdfCeiling: try kdfCeiling.ceiling())
        return (archive, keyStore)
    }
}
