import ArgumentParser
import Foundation
import Glibc
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11Vault

struct Prune: ParsableCommand, HasOutputOptions {
    static let configuration = CommandConfiguration(
        abstract: "Delete old dated archives from a directory, keeping those a retention policy names.",
        discussion: """
        Examples:
          n11archive prune ~/backups --keep-daily 7 --keep-weekly 4 --password-file pw
          n11archive prune ~/backups --keep-last 3 --dry-run
        Only archives that n11archive made are considered: files directly in DIR (not below, \
        not symlinks) named n11archive-YYYYMMDDTHHMMSSZ[-N].nu11vlt whose header reads as an \
        n11archive archive. Anything else is never touched. Archives are ordered by the time \
        in their header; --keep-daily N keeps the newest archive of each of the N most recent \
        UTC days that have one (--keep-weekly: ISO weeks, --keep-monthly: months), --keep-last \
        N the N newest; the rules add up and the newest archive is always kept. Before \
        anything is deleted the newest archive is verified in full (with the password, an \
        identity, or for a secure archive this machine's key store); if that fails nothing is \
        deleted. Only this home's archives count: those it recorded writing (at the recorded \
        place with the recorded size, or byte for byte the recorded SHA-256 elsewhere; see \
        `verify --as-written`), and those that open with the password or key store. Opening \
        with an identity proves nothing (anyone may hold the public key), and files of other \
        users are never read. Anything not counted is left alone.
        """)

    @Argument(help: ArgumentHelp("The directory `create --output-dir` writes to.", valueName: "DIR"), completion: .directory)
    var directory: String

    @Option(name: .customLong("keep-last"), help: ArgumentHelp("Keep the N newest archives.", valueName: "N"))
    var keepLast = 0
    @Option(name: .customLong("keep-daily"), help: ArgumentHelp("Keep the newest archive of each of the last N days (UTC) that have one.", valueName: "N"))
    var keepDaily = 0
    @Option(name: .customLong("keep-weekly"), help: ArgumentHelp("Likewise for the last N ISO weeks.", valueName: "N"))
    var keepWeekly = 0
    @Option(name: .customLong("keep-monthly"), help: ArgumentHelp("Likewise for the last N months.", valueName: "N"))
    var keepMonthly = 0

    @Flag(name: .customLong("dry-run"), help: "Verify and say what would be deleted, deleting nothing.")
    var dryRun = false

    @Option(name: .customLong("lock-wait"),
            help: ArgumentHelp("Wait up to SECONDS for another n11archive writing to or pruning DIR.", valueName: "SECONDS"))
    var lockWait: Double = 0

    @OptionGroup var store: StoreOptions
    @OptionGroup var password: PasswordOptions
    @OptionGroup var identity: IdentityOptions
    @OptionGroup var kdfCeiling: KDFCeilingOptions
    @OptionGroup var outputOptions: OutputOptions

    var policy: ArchiveRetention.Policy {
        .init(keepLast: keepLast, keepDaily: keepDaily, keepWeekly: keepWeekly, keepMonthly: keepMonthly)
    }

    func validate() throws {
        guard [keepLast, keepDaily, keepWeekly, keepMonthly].allSatisfy({ $0 >= 0 }) else {
            throw ValidationError("--keep-* values must be 0 or more")
        }
        if policy.isEmpty {
            // The parser runs this before it reports unknown options: name a mistyped rule.
            let rules = ["--keep-last", "--keep-daily", "--keep-weekly", "--keep-monthly"]
            let options = CommandLine.arguments.filter { $0.hasPrefix("--") }.map { String($0.prefix { $0 != "=" }) }
            if let typo = options.first(where: { word in !rules.contains(word) && rules.contains { Suggestion.distance(word, $0) <= 2 } }),
               let meant = Suggestion.closest(to: typo, among: rules) {
                throw ValidationError("unknown option '\(typo)'; did you mean '\(meant)'?")
            }
            throw ValidationError("give at least one of --keep-last, --keep-daily, --keep-weekly and --keep-monthly (a number above 0)")
        }
        guard lockWait >= 0 else { throw ValidationError("--lock-wait must be 0 or more seconds") }
    }

    struct Document: Encodable {
        struct Kept: Encodable {
            let archive: String
            let created: Date
            let reasons: [String]
        }
        struct Policy: Encodable {
            let keepLast, keepDaily, keepWeekly, keepMonthly: Int
        }
        let outcome = "ok", command = "prune"
        let directory: String
        let dryRun: Bool
        let policy: Policy
        /// The newest archive, verified before anything was deleted (nil: nothing to delete).
        let verified: String?
        let kept: [Kept]
        /// Deleted archives (with dryRun: the ones that would be).
        let deleted: [String]
        /// Files with an archive's name that do not read as an archive: left alone.
        let ignored: [String]
        /// Archives that do not open with this password or key store: left alone, not counted.
        let notOpened: [String]
        let durationSeconds: Double
    }

    @Option(help: ArgumentHelp("For a REMOTE:DIR: where archives are fetched to be checked (default: HOME/spool, 0700).", valueName: "DIR"), completion: .directory)
    var spool: String?

    func run() throws {
        if let remote = RemotePath.parse(directory) {
            let lock = try RemoteLock.acquire(remote, exclusive: true, waitSeconds: lockWait)
            defer { lock.release() }
            try pruneRemote(remote)
            return
        }
        let dir = try DatedArchive.existingDirectory(directory, forPrune: true)
        // Exclusive: no `create --output-dir` into DIR and no other prune runs meanwhile.
        try DirectoryLock.withLock(dir, exclusive: true, waitSeconds: lockWait) { try prune(dir) }
    }

    private func prune(_ dir: String) throws {

        let listing = try ArchiveRetention.archives(in: dir)
        let named = listing.archives, unreadable = listing.unreadable
        for (path, owner) in listing.foreign {
            Console.warning("'\(path)' belongs to uid \(owner), not to you; left alone, not counted")
        }
        for path in unreadable {
            Console.warning("'\(path)' has an n11archive archive's name but does not read as one; left alone (check it with `n11archive info`)")
        }
        // Archives are there, and none is the user's: a prune that says "nothing to prune"
        // every night while the disk fills up (a mount that maps every file to another uid,
        // a job run as the wrong user) must be noticed.
        if named.isEmpty && unreadable.isEmpty, let first = listing.foreign.first {
            throw CLIError(.configuration, "the \(listing.foreign.count) archive(s) in '\(dir)' belong to uid \(first.owner), not to you (uid \(geteuid())), so nothing was deleted",
                           hint: "run prune as the user who owns them; on a network or Windows mount, mount it with your uid (uid=, idmap) so that the files are yours")
        }
        // Only this home's archives count (recorded as written here, or opening through a
        // password or device slot): a header is not authenticated until then, and another
        // home's archives, or forged ones with a recent date, must neither fill the keep
        // slots nor be deleted.
        // When the policy keeps every named archive, it keeps every subset too (an archive's
        // rank and its bucket can only move up when others drop out): nothing can be deleted,
        // so no secret is needed and none is asked for.
        let secrets = CachedSecrets(password: password, store: store, identity: identity)
        let nothingToDelete = ArchiveRetention.apply(policy, to: named).remove.isEmpty
        let (archives, notOpened) = nothingToDelete ? (named, [])
            : try ArchiveRetention.authenticated(named, password: secrets.password, keyStore: secrets.keyStore,
                                                 records: WrittenArchives.all(in: store.resolvedHome), home: store.resolvedHome,
                                                 kdfCeiling: try kdfCeiling.ceiling(), kdfCache: secrets.kdfCache)
        for other in notOpened {
            Console.warning("'\(other.path)' is not counted as this home's; left alone (\(other.reason))")
        }
        if archives.isEmpty && !notOpened.isEmpty {
            throw CLIError(.authentication, "none of the \(notOpened.count) archive(s) in '\(dir)' is this home's (written here, or opening with this password or key store), so nothing was deleted",
                           hint: "check the password (or --home for secure archives); archives of another home in the same directory, and archives that only a recipient's identity opens, are never touched (after a disaster, `n11archive verify --adopt` takes your old archives back as this home's)")
        }
        let decision = ArchiveRetention.apply(policy, to: archives)

        var verified: String? = nil
        if let newest = decision.keep.first?.archive, !decision.remove.isEmpty {
            try ArchiveRetention.refuseIfNewerUnreadable(unreadable, than: newest)
            try verifyNewest(newest.path, secrets)
            verified = newest.path
        }

        let deleted = dryRun ? decision.remove.map(\.path) : try ArchiveRetention.delete(decision.remove, in: dir)

        if outputOptions.json {
            try Console.json(Document(directory: dir, dryRun: dryRun,
                                      policy: .init(keepLast: keepLast, keepDaily: keepDaily, keepWeekly: keepWeekly, keepMonthly: keepMonthly),
                                      verified: verified,
                                      kept: decision.keep.map { .init(archive: $0.archive.path, created: $0.archive.created, reasons: $0.reasons) },
                                      deleted: deleted, ignored: unreadable + listing.foreign.map(\.path), notOpened: notOpened.map(\.path),
                                      durationSeconds: Output.durationSeconds))
            return
        }
        let formatter = ISO8601DateFormatter()
        for kept in decision.keep {
            Console.summary("keep    \(Path.lastComponent(of: kept.archive.path))  \(formatter.string(from: kept.archive.created))  (\(kept.reasons.joined(separator: ", ")))")
        }
        for path in deleted {
            Console.summary("\(dryRun ? "would delete" : "deleted") \(Path.lastComponent(of: path))")
        }
        if archives.isEmpty {
            Console.note("no archives made by n11archive in '\(dir)'; nothing to prune")
        } else {
            Console.note("\(decision.keep.count) kept, \(deleted.count) \(dryRun ? "would be deleted" : "deleted")\(verified.map { " (newest verified: \(Path.lastComponent(of: $0)))" } ?? "")")
        }
    }

    /// `prune REMOTE:DIR`, under the directory's exclusive lock object. An archive counts when
    /// this home's record says it published it there with that size (its time is then the
    /// record's), or else when its header, read from the object's first 64 KiB, opens with
    /// this prune's password or key store through a password or device slot (never by a
    /// recipient's identity: anyone may hold the public key). Nothing else is downloaded:
    /// the newest is fetched and verified in full (or against its record) before anything
    /// is deleted. Temp objects of failed uploads are removed (a dry run only counts them).
    private func pruneRemote(_ dir: RemotePath) throws {
        let rclone = Rclone()
        let home = store.resolvedHome
        let spoolDirectory = try RemoteArchives.spool(spool, home: home)
        let listed = try rclone.list(dir)
        if dryRun {
            let temps = listed.filter { $0.name.hasPrefix(RemoteArchives.tempPrefix) }.count
            if temps > 0 { Console.note("would remove \(temps) temp object(s) of failed uploads from \(dir)") }
        } else {
            let removedTemps = RemoteArchives.removeTemporaries(in: dir, listed: listed, rclone: rclone)
            if removedTemps > 0 { Console.note("removed \(removedTemps) temp object(s) of failed uploads from \(dir)") }
        }
        let records = WrittenArchives.all(in: home)
        let secrets = CachedSecrets(password: password, store: store, identity: identity)
        func fetched<T>(_ remote: RemotePath, _ body: (String) throws -> T) throws -> T {
            Console.note("fetching the newest archive, \(remote), to verify it before anything is deleted…")
            let local = try RemoteArchives.fetch(remote, into: spoolDirectory, rclone: rclone, progress: outputOptions.observer("download"))
            defer { _ = unlink(local) }
            return try body(local)
        }
        var archives: [ArchiveRetention.Candidate] = [], notOpened: [String] = [], ignored: [String] = []
        // Each object's time: a record's, or its header's from the first 64 KiB (not yet
        // authenticated). Nothing else is fetched to decide.
        var dated: [ArchiveRetention.Candidate] = [], unrecorded: [String: ArchiveKeyEntries] = [:]
        for object in listed where ArchiveRetention.isArchiveName(object.name) {
            let path = dir.appending(object.name)
            if let record = records.first(where: { $0.location == path.description && $0.size == object.size }) {
                dated.append(.init(path: path.description, created: record.created))
                continue
            }
            guard let keyEntries = ArchiveKeyEntries(prefix: try rclone.prefix(path, count: RemoteArchives.headerPrefixBytes),
                                                     name: path.description) else {
                Console.warning("'\(path)' has an archive's name but does not start like an n11archive archive; left alone")
                ignored.append(path.description)
                continue
            }
            unrecorded[path.description] = keyEntries
            dated.append(.init(path: path.description, created: keyEntries.header.created))
        }
        // When the policy keeps every one of them, it keeps every subset too (as for a local
        // directory): nothing can be deleted, so nothing is opened and no secret is needed.
        let nothingToDelete = ArchiveRetention.apply(policy, to: dated).remove.isEmpty
        for candidate in dated {
            guard !nothingToDelete, let keyEntries = unrecorded[candidate.path] else {
                archives.append(candidate)
                continue
            }
            do {
                // (No identity is tried here, so what opens is a password or device slot.)
                guard try keyEntries.authenticate(password: secrets.password, keyStore: secrets.keyStore,
                                                  kdfCeiling: try kdfCeiling.ceiling(), kdfCache: secrets.kdfCache).provesOrigin
                else { continue }
                archives.append(candidate)
            } catch let error as ArchiveError {
                switch error {
                case .wrongPassword, .keyNotHere, .noKeyOpens, .passwordNeeded, .damaged, .notAnArchive, .unsupported,
                     .kdfAboveCeiling, .kdfWorkAboveCeiling, .vault(.notInitialized):
                    Console.warning("'\(candidate.path)' is not counted as this home's; left alone (\(ArchiveRetention.NotOpened.reason(for: error)))")
                    notOpened.append(candidate.path)
                default: throw error
                }
            }
        }
        if archives.isEmpty && !notOpened.isEmpty {
            throw CLIError(.authentication, "none of the \(notOpened.count) archive(s) in '\(dir)' is this home's (written here, or opening with this password or key store), so nothing was deleted",
                           hint: "check the password (or --home for secure archives); after a disaster, `n11archive verify --adopt` takes your old archives back as this home's")
        }
        let decision = ArchiveRetention.apply(policy, to: archives)
        var verified: String? = nil
        if let newest = decision.keep.first?.archive, !decision.remove.isEmpty, let remote = RemotePath.parse(newest.path) {
            do {
                try fetched(remote) { local in
                    let reader = try ArchiveReader(path: local, name: newest.path)
                    do {
                        let archive = try reader.unlock(password: secrets.password, keyStore: secrets.keyStore, identities: secrets.identities,
                                                        kdfCeiling: try kdfCeiling.ceiling(), kdfCache: secrets.kdfCache)
                        _ = try ArchiveVerifier.verify(archive, keyStore: archive.header.mode == .secure ? try secrets.keyStore() : nil,
                                                       progress: outputOptions.observer("verify"))
                    } catch ArchiveError.noKeyOpens, ArchiveError.passwordNeeded {
                        try WrittenArchives.check(local, in: home)
                    }
                }
            } catch let error as CategorizedError {
                throw CLIError(error.kind, "the newest archive did not verify, so nothing was deleted: \(error.description)",
                               hint: error.hint ?? "make a new archive with `n11archive create --output-dir \(dir)`, then prune again")
            }
            verified = newest.path
        }
        var deleted: [String] = []
        if !dryRun {
            for archive in decision.remove {
                guard let remote = RemotePath.parse(archive.path) else { continue }
                try rclone.delete(remote)
                deleted.append(archive.path)
            }
        } else {
            deleted = decision.remove.map(\.path)
        }
        if outputOptions.json {
            try Console.json(Document(directory: dir.description, dryRun: dryRun,
                                      policy: .init(keepLast: keepLast, keepDaily: keepDaily, keepWeekly: keepWeekly, keepMonthly: keepMonthly),
                                      verified: verified,
                                      kept: decision.keep.map { .init(archive: $0.archive.path, created: $0.archive.created, reasons: $0.reasons) },
                                      deleted: deleted, ignored: ignored, notOpened: notOpened, durationSeconds: Output.durationSeconds))
            return
        }
        let formatter = ISO8601DateFormatter()
        for kept in decision.keep {
            Console.summary("keep    \(kept.archive.path.split(separator: "/").last ?? "")  \(formatter.string(from: kept.archive.created))  (\(kept.reasons.joined(separator: ", ")))")
        }
        for path in deleted { Console.summary("\(dryRun ? "would delete" : "deleted") \(path.split(separator: "/").last ?? "")") }
        Console.note("\(decision.keep.count) kept, \(deleted.count) \(dryRun ? "would be deleted" : "deleted")\(verified.map { " (newest verified: \($0))" } ?? "")")
    }

    /// Verifies the newest archive in full; on failure nothing may be deleted, and the exit
    /// code is the verification's. A damaged newest archive gets prune's own hint: the
    /// verifier's ("use another copy") does not say what a backup job's owner should do.
    private func verifyNewest(_ path: String, _ secrets: CachedSecrets) throws {
        do {
            let reader = try ArchiveReader(path: path)
            let archive: UnlockedArchive
            do {
                archive = try reader.unlock(password: secrets.password, keyStore: secrets.keyStore, identities: secrets.identities,
                                            kdfCeiling: try kdfCeiling.ceiling(), kdfCache: secrets.kdfCache)
            } catch ArchiveError.noKeyOpens, ArchiveError.passwordNeeded {
                // Made for recipients elsewhere: sound if it is exactly what this home wrote.
                try WrittenArchives.check(path, in: store.resolvedHome)
                return
            }
            _ = try ArchiveVerifier.verify(archive, keyStore: archive.header.mode == .secure ? try secrets.keyStore() : nil,
                                           progress: outputOptions.observer("verify"))
        } catch let error as CategorizedError {
            let pruneHint = "make a new archive with `n11archive create --output-dir` so that the newest one is sound, then prune again; `n11archive verify` checks the older ones"
            throw CLIError(error.kind, "the newest archive did not verify, so nothing was deleted: \(error.description)",
                           hint: error.kind == .damaged ? pruneHint : (error.hint ?? pruneHint))
        }
    }
}

/// The password and key store of one prune, each read at most once (at the first archive
/// that needs it): a directory of thirty archives asks once, not thirty times.
final class CachedSecrets {
    private let passwordOptions: PasswordOptions
    private let store: StoreOptions
    private let identity: IdentityOptions
    private var cachedPassword: SecureBytes?
    private var cachedKeyStore: N11Vault.KeyStore?
    private var cachedIdentities: [P256PrivateKey]?
    /// Argon2id results with this one password, by salt and cost.
    let kdfCache = KDFCache()

    init(password: PasswordOptions, store: StoreOptions, identity: IdentityOptions) {
        passwordOptions = password
        self.store = store
        self.identity = identity
    }

    func password() throws -> SecureBytes? {
        if let cachedPassword { return cachedPassword }
        // No source (cron without a password file): nil, so that archives for recipients
        // can still be told apart; archives that need the password then say so.
        guard passwordOptions.source != nil else { return nil }
        cachedPassword = try passwordOptions.read(confirm: false)
        return cachedPassword
    }

    /// The key store's identities (when there is a key store) and `--identity` files.
    func identities() throws -> [P256PrivateKey] {
        if let cachedIdentities { return cachedIdentities }
        let hasStore = ((try? FileStatus.of(store.resolvedHome.keyStorePath)) ?? nil) != nil
        let found = (hasStore ? try keyStore().identities : []) + (try identity.fromFiles())
        cachedIdentities = found
        return found
    }

    func keyStore() throws -> N11Vault.KeyStore {
        if let cachedKeyStore { return cachedKeyStore }
        let loaded = try store.loadKeyStore()
        cachedKeyStore = loaded
        return loaded
    }
}
