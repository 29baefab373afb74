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
    /// `cache` keeps what was read for the next archive of the same command (a descriptor or
    /// a command can be read only once, and a person is asked once, not per archive).
    func unlock(_ opened: ArchiveReader? = nil, toleratingMissingItems: Bool = false,
                cache: UnlockSecrets = UnlockSecrets()) throws -> (UnlockedArchive, KeyStore?) {
        let reader = try opened ?? self.reader()
        func loadStore() throws -> KeyStore {
            if let keyStore = cache.keyStore { return keyStore }
            let loaded = try store.loadKeyStore()
            cache.keyStore = loaded
            return loaded
        }
        // No source at all (cron without a password file): nil, and the reader says what
        // would open the archive. A password typed on a terminal gets three tries, on the
        // archive already read (a remote one is not fetched again).
        var typed = false
        if case .terminal = password.source { typed = true }
        let archive = try TerminalRetry.run(typed: typed && cache.password == nil, what: "password", isWrong: { error in
            guard case ArchiveError.wrongPassword = error else { return false }
            cache.password = nil
            return true
        }) { try reader.unlock(password: {
            if let password = cache.password { return password }
            cache.password = password.source == nil ? nil : try password.read(confirm: false, cost: reader.header.passwordKDFs.first)
            return cache.password
        },
                                        keyStore: loadStore, identities: {
            if let identities = cache.identities { return identities }
            // A machine without a key store has no identities of its own.
            let hasStore = ((try? FileStatus.of(store.resolvedHome.keyStorePath)) ?? nil) != nil
            let found = (hasStore ? try loadStore().identities : []) + (try identity.fromFiles())
            cache.identities = found
            return found
        }, kdfCeiling: try kdfCeiling.ceiling(), toleratingMissingItems: toleratingMissingItems) }
        return (archive, cache.keyStore)
    }
}

/// What unlocking read, kept for the next archive of one command.
final class UnlockSecrets {
    var password: SecureBytes?
    var keyStore: KeyStore?
    var identities: [P256PrivateKey]?
}

/// Three tries for a secret typed on a terminal: a typo costs typing it again, not the run
/// (age and ssh ask once; gpg and sudo ask three times, which is what a person expects of a
/// prompt). A secret from a file, descriptor or command is tried once: it would be the same.
enum TerminalRetry {
    static let tries = 3

    /// Runs `body` again while it fails with an error `isWrong` accepts (which also forgets
    /// the secret, so the next run asks again), at most `tries` times when `typed`.
    static func run<T>(typed: Bool, what: String, isWrong: (any Error) -> Bool, _ body: () throws -> T) throws -> T {
        var left = typed ? tries - 1 : 0
        while true {
            do { return try body() } catch where left > 0 && isWrong(error) {
                Console.warning("wrong \(what); try again (\(left) \(left == 1 ? "try" : "tries") left)")
                left -= 1
            }
        }
    }
}
