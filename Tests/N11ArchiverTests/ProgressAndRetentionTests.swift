import Foundation
import Glibc
import Synchronization
import Testing
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// Keeps every snapshot an ArchiveProgress reports (interval 0: every chunk).
final class ProgressRecorder: Sendable {
    private let seen = Mutex<[ArchiveProgress.Snapshot]>([])
    var snapshots: [ArchiveProgress.Snapshot] { seen.withLock { $0 } }
    func observer() -> ArchiveProgress {
        ArchiveProgress(interval: 0) { snapshot in self.seen.withLock { $0.append(snapshot) } }
    }
}

@Suite("Progress: totals up front, bytes per chunk, exact at the end")
struct ProgressTests {
    /// A 3 MiB item spans 48 chunks: the bar must move inside it, not only between items.
    static let bigSize = (3 << 20) + 5

    static func check(_ recorder: ProgressRecorder, items: Int, bytes: Int64, _ what: String,
                      sourceLocation: SourceLocation = #_sourceLocation) {
        let snapshots = recorder.snapshots
        guard let first = snapshots.first, let last = snapshots.last else {
            Issue.record("\(what): no progress reported", sourceLocation: sourceLocation)
            return
        }
        #expect(first.totalItems == items && first.totalBytes == bytes && first.items == 0 && first.bytes == 0,
                "\(what): first report \(first)", sourceLocation: sourceLocation)
        #expect(last.finished && last.items == items && last.bytes == bytes, "\(what): last report \(last)", sourceLocation: sourceLocation)
        #expect(snapshots.dropLast().allSatisfy { !$0.finished }, "\(what): finished before the end", sourceLocation: sourceLocation)
        #expect(zip(snapshots, snapshots.dropFirst()).allSatisfy { $0.bytes <= $1.bytes && $0.items <= $1.items },
                "\(what): progress went backwards", sourceLocation: sourceLocation)
        #expect(snapshots.allSatisfy { $0.bytes <= bytes && $0.items <= items }, "\(what): beyond the totals", sourceLocation: sourceLocation)
        // Inside the big item (items go in ID order, so the 10-byte note may come first or
        // last): reports at byte counts that are no item boundary.
        let boundaries: Set<Int64> = [0, 10, Int64(bigSize), Int64(bigSize) + 10]
        let inside = snapshots.filter { !boundaries.contains($0.bytes) }
        #expect(inside.count >= 10, "\(what): only \(inside.count) reports inside the 3 MiB item", sourceLocation: sourceLocation)
    }

    @Test("a failed run reports where it stopped at once, throttled or not, and nothing before it began")
    func whereItStopped() {
        let seen = Mutex<[ArchiveProgress.Snapshot]>([])
        // An hour between reports: only begin and the failure's report can come.
        let progress = ArchiveProgress(interval: 3600) { snapshot in seen.withLock { $0.append(snapshot) } }
        progress.reportWhereItStopped()
        #expect(seen.withLock { $0.isEmpty }, "a report before the run began")
        progress.begin(items: 3, bytes: 30)
        progress.add(bytes: 20)
        progress.itemDone()
        progress.itemDone()
        progress.reportWhereItStopped()
        let snapshots = seen.withLock { $0 }
        #expect(snapshots.count == 2)
        #expect(snapshots.last.map { $0.items == 2 && $0.bytes == 20 && !$0.finished } == true, "\(snapshots)")
    }

    @Test("work done before the bar (an upload that followed the archive) counts in the bytes, not in the rate")
    func alreadyDone() throws {
        let recorder = ProgressRecorder()
        let progress = recorder.observer()
        progress.begin(items: 1, bytes: 1_000, alreadyDone: 600)
        progress.add(bytes: 100)
        let snapshots = recorder.snapshots
        #expect(snapshots.first?.bytes == 600 && snapshots.first?.bytesAtBegin == 600)
        #expect(snapshots.last?.bytes == 700 && snapshots.last?.bytesAtBegin == 600)
        // 100 bytes done in 2 s since the bar began: 50 B/s, not the 350 that 700 would give.
        let later = ArchiveProgress.Snapshot(totalItems: 1, totalBytes: 1_000, items: 0, bytes: 700, elapsed: 2, finished: false,
                                             bytesAtBegin: 600)
        #expect(later.rate == 50)
        #expect(ArchiveProgress.Snapshot(totalItems: 1, totalBytes: 1_000, items: 0, bytes: 700, elapsed: 2, finished: false).rate == 350)
    }

    @Test("create, verify, restore, dry-run and export report progress", arguments: [ArchiveMode.portable, .secure])
    func everyPipeline(mode: ArchiveMode) throws {
        try withTemporaryDirectory { dir in
            let (store, vault) = try makeVault(in: dir, name: "home")
            let big = randomBytes(Self.bigSize)
            _ = try vault.add([photo(big, name: "big.jpg"), note(Array("0123456789".utf8), name: "n")])
            let total = Int64(Self.bigSize + 10)
            let path = dir + "/a.nu11vlt"

            let creating = ProgressRecorder()
            _ = try ArchiveCreator.create(from: vault, .init(mode: mode, compartments: [.vault], output: path, replaceExisting: false,
                                                             kdf: fastKDF), progress: creating.observer()) { try secret(testPassword) }
            Self.check(creating, items: 2, bytes: total, "create \(mode)")

            let verifying = ProgressRecorder()
            let archive = try unlock(path, keyStore: store)
            _ = try ArchiveVerifier.verify(archive, keyStore: store, progress: verifying.observer())
            Self.check(verifying, items: 2, bytes: total, "verify \(mode)")

            let checking = ProgressRecorder()
            let other = try Vault.open(at: dir + "/other-vault", keyStore: store, forWriting: true)
            _ = try ArchiveRestorer.restore(archive, into: other, .init(overwrite: false, dryRun: true), progress: checking.observer())
            Self.check(checking, items: 2, bytes: total, "restore --dry-run \(mode)")

            let restoring = ProgressRecorder()
            _ = try ArchiveRestorer.restore(archive, into: other, .init(overwrite: false, dryRun: false), progress: restoring.observer())
            Self.check(restoring, items: 2, bytes: total, "restore \(mode)")

            let exporting = ProgressRecorder()
            _ = try ArchiveExporter.export(archive, to: dir + "/export", keyStore: store, .init(overwrite: false, dryRun: false),
                                           progress: exporting.observer())
            Self.check(exporting, items: 2, bytes: total, "export \(mode)")
        }
    }

    @Test("items already in the vault are not in the totals of a restore")
    func skippedItemsNotCounted() throws {
        try withTemporaryDirectory { dir in
            let (store, vault) = try makeVault(in: dir, name: "home")
            _ = try vault.add([note(Array("kept".utf8), name: "a"), note(Array("twelve bytes".utf8), name: "b")])
            let path = dir + "/a.nu11vlt"
            try createArchive(from: vault, mode: .portable, to: path)
            // Into the same vault: both items are there unchanged, so nothing is to be written.
            let recorder = ProgressRecorder()
            let report = try ArchiveRestorer.restore(try unlock(path, keyStore: nil), into: vault, .init(overwrite: false, dryRun: false),
                                                     progress: recorder.observer())
            #expect(try report.skippedIdentical.count == 2)
            #expect(recorder.snapshots.first?.totalItems == 0 && recorder.snapshots.first?.totalBytes == 0)
            #expect(recorder.snapshots.last?.finished == true)
            _ = store
        }
    }

    @Test("a failed verify never reports finished")
    func failureNotFinished() throws {
        try withTemporaryDirectory { dir in
            let (_, vault) = try makeVault(in: dir, name: "home")
            _ = try vault.add([photo(randomBytes(200_000), name: "p.jpg")])
            let path = dir + "/a.nu11vlt"
            try createArchive(from: vault, mode: .portable, to: path)
            try flipByte(in: path, at: Int(fileSize(path)!) - 40_000)
            let recorder = ProgressRecorder()
            let archive = try unlock(path, keyStore: nil)  // the manifest is intact; the item's chunk is not
            #expect(throws: ArchiveError.self) {
                _ = try ArchiveVerifier.verify(archive, keyStore: nil, progress: recorder.observer())
            }
            #expect(!recorder.snapshots.isEmpty)
            #expect(!recorder.snapshots.contains { $0.finished })
        }
    }
}

@Suite("Retention: dated names and the prune policy")
struct RetentionTests {
    typealias Candidate = ArchiveRetention.Candidate

    static func date(_ text: String) -> Date {
        let formatter = ISO8601DateFormatter()
        return formatter.date(from: text)!
    }

    static func archives(_ stamps: [String]) -> [Candidate] {
        stamps.map { Candidate(path: "/b/" + ArchiveRetention.fileName(for: date($0)), created: date($0)) }
    }

    static func kept(_ policy: ArchiveRetention.Policy, _ stamps: [String]) -> [String] {
        let formatter = ISO8601DateFormatter()
        return ArchiveRetention.apply(policy, to: archives(stamps)).keep.map { formatter.string(from: $0.archive.created) }
    }

    @Test("names: UTC, sortable, -N on repeats; only that form is recognised")
    func names() {
        let d = Self.date("2026-11-21T22:11:00Z")
        #expect(ArchiveRetention.fileName(for: d) == "n11archive-20261121T221100Z.nu11vlt")
        #expect(ArchiveRetention.fileName(for: d, attempt: 3) == "n11archive-20261121T221100Z-3.nu11vlt")
        for good in ["n11archive-20261121T221100Z.nu11vlt", "n11archive-20261121T221100Z-2.nu11vlt", "n11archive-20261121T221100Z-17.nu11vlt"] {
            #expect(ArchiveRetention.isArchiveName(good), "\(good)")
        }
        for bad in ["n11archive-20261121T221100Z.nu11vlt.bak", "x-n11archive-20261121T221100Z.nu11vlt", "n11archive-20261121T2211Z.nu11vlt",
                    "n11archive-20261121T221100Z-.nu11vlt", "n11archive-20261121T221100Z-a.nu11vlt", "n11archive-2026112XT221100Z.nu11vlt",
                    ".n11tmp-123-n11archive-20261121T221100Z.nu11vlt", "notes.txt", "vault.nu11vlt"] {
            #expect(!ArchiveRetention.isArchiveName(bad), "\(bad)")
        }
        // Later names sort after earlier ones as plain strings (what `ls` shows).
        let names = ["2026-01-02T00:00:00Z", "2025-12-31T23:59:59Z", "2026-01-01T09:00:00Z"].map { ArchiveRetention.fileName(for: Self.date($0)) }
        #expect(names.sorted() == [names[1], names[2], names[0]])
    }

    @Test("keep-last keeps the N newest, whatever the input order")
    func keepLast() {
        let stamps = ["2026-11-03T10:00:00Z", "2026-11-01T10:00:00Z", "2026-11-05T10:00:00Z", "2026-11-04T10:00:00Z", "2026-11-02T10:00:00Z"]
        #expect(Self.kept(.init(keepLast: 2), stamps) == ["2026-11-05T10:00:00Z", "2026-11-04T10:00:00Z"])
        let decision = ArchiveRetention.apply(.init(keepLast: 2), to: Self.archives(stamps))
        #expect(decision.remove.count == 3 && decision.keep[0].reasons == ["newest", "last"])
        #expect(Self.kept(.init(keepLast: 10), stamps).count == 5)
    }

    @Test("keep-daily: the newest archive of each of the N most recent UTC days that have one")
    func keepDaily() {
        let stamps = ["2026-11-20T08:00:00Z", "2026-11-20T20:00:00Z",   // day 20: the 20:00 one
                      "2026-11-21T23:30:00Z",                            // late on the 21st, UTC
                      "2026-11-22T00:30:00Z", "2026-11-22T00:10:00Z",   // early on the 22nd
                      "2026-11-17T12:00:00Z"]                            // a gap: days without archives do not count
        #expect(Self.kept(.init(keepDaily: 3), stamps) == ["2026-11-22T00:30:00Z", "2026-11-21T23:30:00Z", "2026-11-20T20:00:00Z"])
        #expect(Self.kept(.init(keepDaily: 4), stamps).last == "2026-11-17T12:00:00Z")
    }

    @Test("keep-weekly uses ISO weeks (Monday first; 1 Jan 2027 is in week 53 of 2026)")
    func keepWeekly() {
        // Sat 21 and Sun 22 Nov 2026 are one ISO week; Mon 23 starts the next.
        #expect(Self.kept(.init(keepWeekly: 2), ["2026-11-21T10:00:00Z", "2026-11-22T10:00:00Z", "2026-11-23T10:00:00Z"])
                == ["2026-11-23T10:00:00Z", "2026-11-22T10:00:00Z"])
        // Thu 31 Dec 2026 and Fri 1 Jan 2027 share 2026-W53; Mon 4 Jan 2027 is 2027-W01.
        #expect(Self.kept(.init(keepWeekly: 2), ["2026-12-31T10:00:00Z", "2027-01-01T10:00:00Z", "2027-01-04T10:00:00Z"])
                == ["2027-01-04T10:00:00Z", "2027-01-01T10:00:00Z"])
    }

    @Test("keep-monthly, and rules add up with the newest always kept")
    func keepMonthlyAndUnion() {
        let stamps = ["2026-09-30T23:59:59Z", "2026-10-01T00:00:00Z", "2026-10-15T00:00:00Z", "2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z"]
        #expect(Self.kept(.init(keepMonthly: 2), stamps) == ["2026-11-03T00:00:00Z", "2026-10-15T00:00:00Z"])
        let decision = ArchiveRetention.apply(.init(keepDaily: 1, keepMonthly: 3), to: Self.archives(stamps))
        #expect(decision.keep.map(\.reasons) == [["newest", "daily", "monthly"], ["monthly"], ["monthly"]])
        #expect(decision.remove.map(\.created) == [Self.date("2026-11-02T00:00:00Z"), Self.date("2026-10-01T00:00:00Z")])
        // Even a policy that names nothing keeps the newest (the CLI refuses such a policy anyway).
        #expect(Self.kept(.init(), stamps) == ["2026-11-03T00:00:00Z"])
        #expect(ArchiveRetention.apply(.init(keepLast: 1), to: []).keep.isEmpty)
    }

    @Test("two archives of the same second: the -2 one is the newer")
    func sameSecond() {
        let d = Self.date("2026-11-21T22:11:00Z")
        let first = Candidate(path: "/b/" + ArchiveRetention.fileName(for: d), created: d)
        let second = Candidate(path: "/b/" + ArchiveRetention.fileName(for: d, attempt: 2), created: d)
        let tenth = Candidate(path: "/b/" + ArchiveRetention.fileName(for: d, attempt: 10), created: d)
        #expect(ArchiveRetention.apply(.init(keepLast: 1), to: [first, tenth, second]).keep.map(\.archive) == [tenth])
        #expect(ArchiveRetention.apply(.init(keepLast: 2), to: [first, tenth, second]).remove == [first])
    }
}
