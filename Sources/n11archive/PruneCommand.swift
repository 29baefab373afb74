import ArgumentParser
import Foundation
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
        users are never read. Anything not counted is left alone. With a trusted signer \
        (`key trust`, --signed-by), what counts is every archive a trusted key signed under \
        its own date, with no secret needed; unsigned archives, others' and renamed copies \
        are never counted or deleted.
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

    @OptionGroup var trust: SignerTrustOptions

    func run() throws {
        let store = try ArchiveStores.open(directory, spool: spool, home: self.store.resolvedHome, forPrune: true)
        let isRemote = store is RcloneStore
        let secrets = UnlockSources(password: password, store: self.store, identity: identity)
        secrets.signerTrust = try trust.resolve(home: self.store.resolvedHome)
        // A password typed at the prompt gets the tries restore and list give: nothing was
        // deleted before the newest archive verified, so the prune runs again from the start.
        var typed = false
        if case .terminal = password.source { typed = true }
        let report = try TerminalRetry.run(typed: typed, what: "password", isWrong: { error in
            guard case ArchiveError.newestNotVerified(let cause) = error, case ArchiveError.wrongPassword = cause else { return false }
            secrets.forgetPassword()
            return true
        }) { try ArchivePruner.prune(store, .init(
            policy: policy, dryRun: dryRun, home: self.store.resolvedHome,
            secrets: secrets,
            kdfCeiling: try kdfCeiling.ceiling(), lockWait: lockWait,
            notice: { notice in
                switch notice {
                case .leftovers(let count):
                    Console.note("\(dryRun ? "would remove" : "removed") \(count) temp object(s) of failed uploads from \(store.location)")
                case let .foreign(path, owner):
                    Console.warning("'\(path)' belongs to uid \(owner), not to you; left alone, not counted")
                case .unreadable(let path):
                    Console.warning("'\(path)' has an n11archive archive's name but does not read as one; left alone (check it with `n11archive info`)")
                case .notCounted(let other):
                    Console.warning("'\(other.path)' is not counted as this home's; left alone (\(other.reason))")
                case .verifying(let path):
                    if isRemote { Console.note("fetching the newest archive, \(path), to verify it before anything is deleted…") }
                case .deleted(let path):
                    // Said as it happens (the summary lines come at the end): a Ctrl-C or a
                    // remote that fails part-way must not leave the user guessing.
                    if !outputOptions.json { Console.summary("deleted \(Self.archiveName(path))") }
                }
            },
            progress: { outputOptions.observer($0) })) }
        try render(report, of: store)
    }

    /// The archive's own name, whether the path is a directory's or `REMOTE:DIR`'s.
    static func archiveName(_ path: String) -> String { String(path.split(whereSeparator: { $0 == "/" || $0 == ":" }).last ?? "") }

    /// The report as JSON, or as a line per archive and a summary.
    private func render(_ report: ArchivePruner.Report, of store: any ArchiveStore) throws {
        let decision = report.decision
        if outputOptions.json {
            try Console.json(Document(directory: store.location, dryRun: dryRun,
                                       policy: .init(keepLast: keepLast, keepDaily: keepDaily, keepWeekly: keepWeekly, keepMonthly: keepMonthly),
                                       verified: report.verified,
                                       kept: decision.keep.map { .init(archive: $0.archive.path, created: $0.archive.created, reasons: $0.reasons) },
                                       deleted: report.deleted, ignored: report.unreadable + report.foreign,
                                       notOpened: report.notCounted.map(\.path), durationSeconds: Output.durationSeconds))
            return
        }
        let name = Self.archiveName
        let formatter = ISO8601DateFormatter()
        for kept in decision.keep {
            Console.summary("keep    \(name(kept.archive.path))  \(formatter.string(from: kept.archive.created))  (\(kept.reasons.joined(separator: ", ")))")
        }
        // A real run's deletions were said as they happened.
        if dryRun {
            for path in report.deleted { Console.summary("would delete \(name(path))") }
        }
        if !report.countedAny {
            Console.note("no archives made by n11archive in '\(store.location)'; nothing to prune")
        } else {
            Console.note("\(decision.keep.count) kept, \(report.deleted.count) \(dryRun ? "would be deleted" : "deleted")\(report.verified.map { " (newest verified: \(name($0)))" } ?? "")")
        }
    }
}
