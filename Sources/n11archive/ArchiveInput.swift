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
    @OptionGroup var trust: SignerTrustOptions

    /// Opens and authenticates the archive: identities (the key store's and `--identity`
    /// files) are tried on recipient slots first, then the password; secure archives load
    /// the key store. Pass a reader already opened to avoid opening the file twice, and the
    /// `sources` of earlier archives of the same command to gather nothing twice.
    /// A password typed on a terminal gets three tries, on the archive already read (a
    /// remote one is not fetched again).
    func unlock(_ opened: ArchiveReader? = nil, toleratingMissingItems: Bool = false,
                sources given: UnlockSources? = nil) throws -> (UnlockedArchive, KeyStore?) {
        let reader = try opened ?? self.reader()
        let sources = try given ?? unlockSources()
        // An incremental archive's dependencies are found where it lies, by their IDs.
        sources.dependencies = reader.header.dependsOn.isEmpty ? nil : try dependencyFinder()
        if trust.noSignerCheck, let rule = try? SignerTrust.resolve(signedBy: [], home: store.resolvedHome),
           let refusal = rule.refusal(reader.signature, header: reader.header, fileName: reader.name) {
            Console.warning("'\(reader.name)' is read without the signer check, and this home would refuse it: \(refusal)")
        }
        var typed = false
        if case .terminal = password.source { typed = true }
        do {
            return try unlock(reader, sources: sources, typed: typed, toleratingMissingItems: toleratingMissingItems)
        } catch let error as ArchiveError where !typed && Self.endsInBlank(sources) {
            guard case .wrongPassword = error else { throw error }
            // Invisible in the file and in the message: a trailing space or tab is part of it.
            throw CLIError(error.kind, error.description,
                           hint: "the password read ends in a space or tab, which counts as part of it: check the end of the file's first line (or what the command or descriptor printed)")
        }
    }

    /// Whether the password read (if one was) ends in a space or tab.
    private static func endsInBlank(_ sources: UnlockSources) -> Bool {
        guard sources.hasPassword, let password = try? sources.password(cost: nil) else { return false }
        return password.withUnsafeBytes { $0.last.map { $0 == 0x20 || $0 == 0x09 } ?? false }
    }

    private func unlock(_ reader: ArchiveReader, sources: UnlockSources, typed: Bool,
                        toleratingMissingItems: Bool) throws -> (UnlockedArchive, KeyStore?) {
        let archive = try TerminalRetry.run(typed: typed && !sources.hasPassword, what: "password", isWrong: { error in
            guard case ArchiveError.wrongPassword = error else { return false }
            sources.forgetPassword()
            return true
        }) {
            do {
                return try reader.unlock(with: sources, kdfCeiling: try kdfCeiling.ceiling(), toleratingMissingItems: toleratingMissingItems)
            } catch ArchiveError.vault(.notInitialized(let home)) where reader.header.mode == .secure {
                // `init` would make a new key store, which opens no archive made before it.
                throw CLIError(.configuration, "no key store in '\(home)': '\(reader.name)' is a secure archive, which opens only with the key store of the home that made it",
                               hint: "run this where that home is, or point --home (or N11_HOME) at it; a new `n11archive init` cannot open it")
            }
        }
        if let pages = archive.pagesReadWithoutRoot {
            Console.warning("'\(reader.name)' has no manifest root (a copy cut short?): restoring only the items of its first \(pages.read) manifest page(s), each verified (\(pages.stopped)); whether the archive held more cannot be known, so the restore ends partial (exit 3)")
        }
        for page in archive.lostPages {
            Console.warning("manifest page \(page.number) of '\(reader.name)' does not read (\(page.problem)): its \(page.itemCount) item(s), the first \(page.firstID), cannot be restored; the other pages are read, each verified, and the restore ends partial (exit 3)")
        }
        return (archive, sources.keyStoreIfLoaded)
    }

    /// The archives beside this one (its directory, or its remote directory).
    func dependencyFinder() throws -> any DependencyFinder {
        let home = store.resolvedHome
        if let (remote, _) = ArchiveStores.remoteFile(file, spool: spool, home: home) {
            return StoreDependencies(remote, announce: { Console.note("fetching \($0), which it depends on…") })
        }
        return StoreDependencies(try ArchiveStores.open(Path.directory(of: Path.absolute(file)), spool: nil, home: home, forPrune: false))
    }

    /// What may open this command's archives (`UnlockSources`) and which signers it trusts,
    /// from its options.
    func unlockSources() throws -> UnlockSources {
        let sources = UnlockSources(password: password, store: store, identity: identity)
        sources.signerTrust = try trust.resolve(home: store.resolvedHome)
        return sources
    }
}

extension UnlockSources {
    /// From a command's options. No password source at all (cron without a password file)
    /// gives no password, and the reader then says what would open the archive.
    /// (nil `password`: a command that takes no password, such as `unseal`).
    convenience init(password: PasswordOptions?, store: StoreOptions, identity: IdentityOptions) {
        self.init(password: { cost in
                      guard let password, password.source != nil else { return nil }
                      return try password.read(confirm: false, cost: cost)
                  },
                  keyStore: { try store.loadKeyStore() },
                  keyStoreExists: { ((try? FileStatus.of(store.resolvedHome.keyStorePath)) ?? nil) != nil },
                  identityFiles: { try identity.fromFiles() })
    }
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
