import Foundation
import Glibc
import N11Crypto
import N11System
import N11Vault

/// Dated archive names (`create --output-dir`) and the retention policy of `prune`.
///
/// The policy follows restic's `forget` and borg's `prune`: archives are ordered newest
/// first by the creation time in their header; `--keep-last N` keeps the N newest;
/// `--keep-daily N` keeps the newest archive of each of the N most recent UTC days that
/// have an archive (likewise ISO weeks and calendar months, in UTC); the rules add up, and
/// the newest archive is always kept. Everything else is removed.
public enum ArchiveRetention {
    public struct Policy: Sendable, Equatable {
        public var keepLast = 0
        public var keepDaily = 0
        public var keepWeekly = 0
        public var keepMonthly = 0

        public init(keepLast: Int = 0, keepDaily: Int = 0, keepWeekly: Int = 0, keepMonthly: Int = 0) {
            self.keepLast = keepLast; self.keepDaily = keepDaily
            self.keepWeekly = keepWeekly; self.keepMonthly = keepMonthly
        }

        /// A policy with no rule would keep only the newest archive: refused by the CLI.
        public var isEmpty: Bool { keepLast == 0 && keepDaily == 0 && keepWeekly == 0 && keepMonthly == 0 }
    }

    /// One archive n11archive made: its path and the creation time from its header.
    public struct Candidate: Sendable, Equatable {
        public let path: String
        public let created: Date
        public init(path: String, created: Date) { self.path = path; self.created = created }
    }

    public struct Decision: Sendable {
        /// Newest first, each with the rules that keep it ("newest", "last", "daily", …).
        public var keep: [(archive: Candidate, reasons: [String])] = []
        /// Newest first.
        public var remove: [Candidate] = []
    }

    /// Applies `policy` to `archives` (any order). A pure function of its inputs.
    public static func apply(_ policy: Policy, to archives: [Candidate]) -> Decision {
        // Newest first; equal times (same second) by the name's -N suffix, higher first
        // (create picks -2 only when the bare name exists, so -2 is the later one).
        let ordered = archives.sorted(by: newestFirst)
        var reasons = Array(repeating: [String](), count: ordered.count)
        if !ordered.isEmpty { reasons[0].append("newest") }
        for index in ordered.indices.prefix(policy.keepLast) { reasons[index].append("last") }
        keepNewestPerBucket(ordered, count: policy.keepDaily, reason: "daily", into: &reasons) { dayKey($0) }
        keepNewestPerBucket(ordered, count: policy.keepWeekly, reason: "weekly", into: &reasons) { weekKey($0) }
        keepNewestPerBucket(ordered, count: policy.keepMonthly, reason: "monthly", into: &reasons) { monthKey($0) }

        var decision = Decision()
        for (archive, why) in zip(ordered, reasons) {
            if why.isEmpty { decision.remove.append(archive) } else { decision.keep.append((archive, why)) }
        }
        return decision
    }

    /// The order of archives everywhere (`prune`, `archives`): newest first by header time;
    /// in the same second by the name's -N suffix, higher first (create picks -2 only when
    /// the bare name exists, so -2 is the later one); then by path.
    public static func newestFirst(_ a: Candidate, _ b: Candidate) -> Bool {
        if a.created != b.created { return a.created > b.created }
        let x = sequence(of: Path.lastComponent(of: a.path)), y = sequence(of: Path.lastComponent(of: b.path))
        return x != y ? x > y : a.path > b.path
    }

    /// Walks newest first; the first archive seen in each new bucket is that bucket's newest.
    private static func keepNewestPerBucket(_ ordered: [Candidate], count: Int, reason: String,
                                            into reasons: inout [[String]], key: (Date) -> String) {
        guard count > 0 else { return }
        var lastBucket: String? = nil
        var kept = 0
        for (index, archive) in ordered.enumerated() {
            let bucket = key(archive.created)
            if bucket == lastBucket { continue }
            lastBucket = bucket
            reasons[index].append(reason)
            kept += 1
            if kept == count { return }
        }
    }

    private static let utc = TimeZone(identifier: "UTC")!

    private static let isoCalendar: Calendar = {
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = utc
        return calendar
    }()

    static func dayKey(_ date: Date) -> String {
        let c = isoCalendar.dateComponents([.year, .month, .day], from: date)
        return "\(c.year!)-\(c.month!)-\(c.day!)"
    }

    /// ISO 8601 week: weeks start on Monday; 31 Dec can belong to week 1 of the next year.
    static func weekKey(_ date: Date) -> String {
        let c = isoCalendar.dateComponents([.yearForWeekOfYear, .weekOfYear], from: date)
        return "\(c.yearForWeekOfYear!)-W\(c.weekOfYear!)"
    }

    static func monthKey(_ date: Date) -> String {
        let c = isoCalendar.dateComponents([.year, .month], from: date)
        return "\(c.year!)-\(c.month!)"
    }

    // MARK: names

    public static let namePrefix = "n11archive-"
    public static let nameSuffix = ".nu11vlt"

    /// `n11archive-20261121T221100Z.nu11vlt`, then `…Z-2.nu11vlt`, `…Z-3.nu11vlt` (UTC,
    /// so that names sort by time whatever the machine's time zone).
    public static func fileName(for date: Date, attempt: Int = 1) -> String {
        // The second the header records (it keeps whole seconds, rounded down): Calendar
        // would round 20.9999999 up to 21.
        let second = Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))
        let c = isoCalendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: second)
        let stamp = String(format: "%04d%02d%02dT%02d%02d%02dZ", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!)
        return namePrefix + stamp + (attempt > 1 ? "-\(attempt)" : "") + nameSuffix
    }

    /// The `yyyyMMddTHHmmssZ` of a name `isArchiveName` accepts.
    public static func stamp(of name: String) -> String {
        String(name.dropFirst(namePrefix.count).prefix(16))
    }

    /// The N of a `…Z-N.nu11vlt` name; 1 for the bare name (and for any other name).
    public static func sequence(of name: String) -> Int {
        guard name.hasSuffix(nameSuffix) else { return 1 }
        let stem = name.dropLast(nameSuffix.count)
        guard let dash = stem.lastIndex(of: "-"), dash > stem.startIndex, stem[stem.index(before: dash)] == "Z",
              let n = Int(stem[stem.index(after: dash)...]) else { return 1 }
        return n
    }

    /// Whether `name` has the form `fileName(for:attempt:)` produces.
    public static func isArchiveName(_ name: String) -> Bool {
        guard name.hasPrefix(namePrefix), name.hasSuffix(nameSuffix) else { return false }
        let middle = Array(name.utf8.dropFirst(namePrefix.utf8.count).dropLast(nameSuffix.utf8.count))
        // yyyyMMdd T HHmmss Z, then optionally -N
        guard middle.count >= 16 else { return false }
        let isDigit: (UInt8) -> Bool = { $0 >= 0x30 && $0 <= 0x39 }
        guard middle[0..<8].allSatisfy(isDigit), middle[8] == UInt8(ascii: "T"), middle[9..<15].allSatisfy(isDigit),
              middle[15] == UInt8(ascii: "Z") else { return false }
        let rest = middle[16...]
        if rest.isEmpty { return true }
        return rest.count >= 2 && rest.first == UInt8(ascii: "-") && rest.dropFirst().allSatisfy(isDigit)
    }
}

extension ArchiveRetention {
    public struct NotOpened: Sendable {
        public let path: String
        public let reason: String

        /// Why an archive that failed to open with a password or key store is not counted.
        /// One that only recipient slots open is not "unopenable" here: this home's identity
        /// may well open it, but that would not show who made it.
        public static func reason(for error: ArchiveError) -> String {
            switch error {
            case .noKeyOpens(_, let recipients, 0) where recipients > 0:
                return "it opens only through recipient slots, and anyone with the public key can make such an archive; this home has no record of writing it"
            case .noKeyOpens, .passwordNeeded:
                // noKeyOpens with password slots: no password was given.
                return "it needs a password and none was given (its recipient slots, if any, prove nothing about who made it)"
            default:
                return error.description
            }
        }
    }
}

/// The lock of an archive directory: `create --output-dir` holds it shared while it writes,
/// `prune` exclusively while it decides and deletes, so prune never runs beside a create into
/// the same place. It is a 0600 file of the user's, `DIR/.n11archive.lock`, not the directory
/// itself: any local user who can read a directory can flock it and so block every backup
/// into it. A lock file planted by another user, or a link in its place, is refused.
public final class DirectoryLock: @unchecked Sendable {
    public static let fileName = ".n11archive.lock"
    private let lock: FileLock

    private init(_ lock: FileLock) { self.lock = lock }

    /// Gives the lock up now (it is also given up when this is freed).
    public func release() { lock.release() }

    /// Runs `body` holding the lock of `directory` (see `acquire`), released when it ends.
    public static func withLock<T>(_ directory: String, exclusive: Bool, waitSeconds: Double,
                                   _ body: () throws -> T) throws -> T {
        let held = try acquire(directory, exclusive: exclusive, waitSeconds: waitSeconds)
        return try FileLock.withLock(held.lock, body)
    }

    public static func acquire(_ directory: String, exclusive: Bool, waitSeconds: Double) throws(ArchiveError) -> DirectoryLock {
        let path = Path.join(directory, fileName)
        let outcome: FileLock.Outcome
        do { outcome = try FileLock.acquire(path, shared: !exclusive, waitSeconds: waitSeconds) }
        catch let error as SystemError { throw .system(error) }
        catch let violation as PrivatePermissions.Violation {
            let what: String
            if case .wrongOwner(_, let owner) = violation { what = "belongs to uid \(owner), not to you" } else { what = "is not a regular file" }
            throw .directoryLock(path: path, kind: .configuration, why: "the lock file '\(path)' \(what); nothing was done",
                          hint: "remove it if you trust the directory (another user who can write there may have planted it to block your backups), or keep backups in a directory only you can write to")
        } catch { throw .wrap(error) }
        switch outcome {
        case .acquired(let lock): return DirectoryLock(lock)
        case .heldBy:
            throw .directoryLock(path: path, kind: .busy, why: "another n11archive is \(exclusive ? "using" : "pruning") '\(directory)'",
                          hint: "wait for it to finish, or give --lock-wait SECONDS")
        }
    }
}
