import Foundation
import Testing
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// An archive store in memory, for `ArchivePruner` without a disk or a remote: objects are
/// byte arrays, a fetch writes a copy into a scratch directory, and failures are set per test
/// (a lock held elsewhere, a delete that fails after some succeeded).
final class MemoryArchiveStore: ArchiveStore {
    var objects: [String: [UInt8]] = [:]
    /// Objects that belong to another user (uid).
    var foreign: [String: UInt32] = [:]
    /// Leftovers of failed writes, removed by `removeLeftovers`.
    var leftovers: Set<String> = []
    /// Deletes that succeed before the next one fails (nil: none fails).
    var deletesBeforeFailure: Int?
    var lockHeldElsewhere = false
    private(set) var headerReads: [String] = []
    private(set) var fetched: [String] = []
    private(set) var locked = false
    let scratch: String

    init(scratch: String) { self.scratch = scratch }

    final class Lock: ArchiveStoreLock {
        let store: MemoryArchiveStore
        init(_ store: MemoryArchiveStore) { self.store = store }
        func release() { store.locked = false }
    }

    var location: String { "mem:backups" }
    func location(of name: String) -> String { "mem:backups/" + name }

    func list() throws(ArchiveError) -> [StoredObject] {
        (objects.keys.sorted() + leftovers.sorted()).map { name in
            StoredObject(name: name, size: Int64(objects[name]?.count ?? 0), foreignOwner: foreign[name])
        }
    }

    func keyEntries(of object: StoredObject) throws(ArchiveError) -> ArchiveKeyEntries? {
        precondition(object.foreignOwner == nil, "a foreign object was read")
        headerReads.append(object.name)
        return ArchiveKeyEntries(prefix: Array((objects[object.name] ?? []).prefix(RemoteArchives.headerPrefixBytes)),
                                 name: location(of: object.name))
    }

    func fetch(_ object: StoredObject, progress: ArchiveProgress?) throws(ArchiveError) -> FetchedArchive {
        fetched.append(object.name)
        let path = scratch + "/fetched-" + object.name
        do { try AtomicFile.write(objects[object.name] ?? [], to: path, mode: 0o600) } catch { throw .caller(UnclassifiedError(error, context: path)) }
        return FetchedArchive(path: path, name: location(of: object.name), isCopy: true)
    }

    func delete(_ object: StoredObject) throws(ArchiveError) {
        precondition(locked, "deleted without the lock")
        if let left = deletesBeforeFailure {
            guard left > 0 else {
                throw .remote(location: location(of: object.name), why: "the connection dropped", kind: .ioFailure, hint: nil)
            }
            deletesBeforeFailure = left - 1
        }
        objects[object.name] = nil
    }

    func finishDeleting() throws(ArchiveError) {}

    func lock(exclusive: Bool, waitSeconds: Double) throws(ArchiveError) -> any ArchiveStoreLock {
        if lockHeldElsewhere {
            throw .directoryLock(path: location, kind: .busy, why: "another n11archive is using '\(location)'", hint: nil)
        }
        locked = true
        return Lock(self)
    }

    func removeLeftovers(dryRun: Bool) -> Int {
        let count = leftovers.count
        if !dryRun { leftovers.removeAll() }
        return count
    }

    func publishNew(name: String?, at date: Date, _ options: PublishOptions,
                    make: (NewArchiveFile) throws -> ArchiveCreator.Report) throws -> Publication {
        let chosen = name ?? ArchiveRetention.fileName(for: date)
        let report = try make(NewArchiveFile(path: scratch + "/made-" + chosen))
        objects[chosen] = try readBytes(report.path)
        return Publication(report: report, location: location(of: chosen), upload: nil)
    }

    func recorded(_ object: StoredObject, in records: [WrittenArchives.Record]) -> WrittenArchives.Record? {
        records.first { $0.location == location(of: object.name) && $0.size == object.size }
    }

    func check(_ object: StoredObject, against record: WrittenArchives.Record, home: N11Home) throws(ArchiveError) -> RecordMatch {
        record.location == location(of: object.name) && record.size == object.size ? .written : .unproven
    }
}

/// A vault and archives of it, made with this password or for these recipients, dated.
private struct PruneWorld {
    let world: KeySlotTests.World
    let home: N11Home
    let store: MemoryArchiveStore

    init(dir: String) throws {
        world = try KeySlotTests.World(dir: dir)
        home = N11Home(root: dir + "/pruning-home")
        store = MemoryArchiveStore(scratch: dir)
    }

    /// Puts an archive made `daysAgo` days ago into the store under its dated name.
    @discardableResult
    func put(daysAgo: Double, passwords: [String] = [testPassword], recipients: [P256PublicKey] = [],
             attempt: Int = 1, signer: Ed25519SigningKey? = nil) throws -> String {
        let created = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 - daysAgo * 86_400).rounded(.down))
        let name = ArchiveRetention.fileName(for: created, attempt: attempt)
        let path = world.dir + "/" + name
        var request = ArchiveCreator.Request(mode: .portable, compartments: [.vault], output: path, replaceExisting: true, kdf: fastKDF, now: created)
        request.signingKey = signer
        _ = try ArchiveCreator.create(from: world.vault, request) {
            ArchiveAccess(passwords: try passwords.map { try secret($0) }, recipients: recipients, kdf: fastKDF)
        }
        store.objects[name] = try readBytes(path)
        return name
    }

    func prune(keepLast: Int = 0, keepDaily: Int = 0, dryRun: Bool = false, password: String? = testPassword,
               trust: SignerTrust = .anySigner,
               passwordAsked: (() -> Void)? = nil, notices: ((ArchivePruner.Notice) -> Void)? = nil) throws(ArchiveError) -> ArchivePruner.Report {
        let secrets = UnlockSources(password: { _ in
            passwordAsked?()
            return try password.map { try secret($0) }
        }, keyStore: { throw NoKeyStore() }, keyStoreExists: { false }, identityFiles: { [] })
        secrets.signerTrust = trust
        return try ArchivePruner.prune(store, .init(policy: .init(keepLast: keepLast, keepDaily: keepDaily), dryRun: dryRun, home: home,
                                                    secrets: secrets, kdfCeiling: .standard, notice: notices ?? { _ in }))
    }
}

@Suite("ArchivePruner against an in-memory store: retention, trust, locking and failures")
struct ArchivePrunerTests {
    @Test("the policy keeps the newest N, the newest is fetched and verified once, the rest are deleted under the lock")
    func keepsAndDeletes() throws {
        try withTemporaryDirectory { dir in
            let w = try PruneWorld(dir: dir)
            let names = try (0..<4).map { try w.put(daysAgo: Double($0)) }   // newest first
            let report = try w.prune(keepLast: 2)
            #expect(report.decision.keep.map(\.archive.path) == names.prefix(2).map(w.store.location))
            #expect(report.deleted == names.suffix(2).map(w.store.location))
            #expect(report.verified == w.store.location(of: names[0]))
            #expect(w.store.fetched == [names[0]], "only the newest is fetched whole")
            #expect(Set(w.store.objects.keys) == Set(names.prefix(2)))
            #expect(!w.store.locked, "the lock is given back")

            // A dry run says the same and deletes nothing.
            try w.put(daysAgo: 5)
            let before = w.store.objects
            let dry = try w.prune(keepLast: 2, dryRun: true)
            #expect(dry.deleted.count == 1 && w.store.objects == before)
        }
    }

    @Test("a policy that keeps everything opens nothing and asks for no secret")
    func keepsAllWithoutSecrets() throws {
        try withTemporaryDirectory { dir in
            let w = try PruneWorld(dir: dir)
            for day in 0..<3 { try w.put(daysAgo: Double(day)) }
            var asked = 0
            let report = try w.prune(keepDaily: 7, passwordAsked: { asked += 1 })
            #expect(report.deleted.isEmpty && report.verified == nil)
            #expect(asked == 0 && w.store.fetched.isEmpty)
        }
    }

    @Test("a stranger's archive for our public key, and a second copy of a counted archive, are not counted or deleted")
    func strangersAndCopies() throws {
        try withTemporaryDirectory { dir in
            let w = try PruneWorld(dir: dir)
            let ours = try (1...3).map { try w.put(daysAgo: Double($0)) }
            // Anyone with A's public key makes this, dated as the newest night.
            let forged = try w.put(daysAgo: 0, passwords: [], recipients: [w.world.a.publicKey])
            // A copy of our newest under a later same-second name.
            let copy = ArchiveRetention.fileName(for: try #require(ArchiveKeyEntries(prefix: w.store.objects[ours[0]]!, name: ""))
                .header.created, attempt: 2)
            w.store.objects[copy] = w.store.objects[ours[0]]
            var notCounted: [String] = []
            let report = try w.prune(keepLast: 1, notices: { if case .notCounted(let n) = $0 { notCounted.append(n.path) } })
            let kept = report.decision.keep.map(\.archive.path)
            let pair = Set([ours[0], copy].map(w.store.location))
            #expect(kept.count == 1 && pair.contains(kept[0]), "\(kept)")
            #expect(Set(notCounted) == Set([w.store.location(of: forged)]).union(pair.subtracting(kept)), "\(notCounted)")
            #expect(report.deleted == ours.dropFirst().map(w.store.location))
            #expect(w.store.objects[forged] != nil && w.store.objects[copy] != nil)
        }
    }

    @Test("with a trusted signer, from the first bytes alone: only its archives count; a stranger's, an unsigned one, a changed header and a renamed copy are never counted or deleted")
    func trustedSigner() throws {
        try withTemporaryDirectory { dir in
            let w = try PruneWorld(dir: dir)
            let ours = try Ed25519SigningKey.generate(), theirs = try Ed25519SigningKey.generate()
            let real = try (1...3).map { try w.put(daysAgo: Double($0), signer: ours) }   // newest first
            let stranger = try w.put(daysAgo: 0.5, passwords: [], recipients: [w.world.a.publicKey], signer: theirs)
            let unsigned = try w.put(daysAgo: 0.4)
            // Our newest night with its signature changed, under a newer name.
            let changedName = ArchiveRetention.fileName(for: Date().addingTimeInterval(-3600))
            let scratch = dir + "/changed.nu11vlt"
            try writeBytes(w.store.objects[real[0]]!, to: scratch)
            try editStoredEntry(in: scratch, named: EntryName.headerSignature) { $0[0] ^= 1 }
            w.store.objects[changedName] = try readBytes(scratch)
            // The oldest night copied under a newer date.
            let copyName = ArchiveRetention.fileName(for: Date().addingTimeInterval(-60))
            w.store.objects[copyName] = w.store.objects[real[2]]
            // The newest night copied beside itself under -2, which passes the date rule
            // and sorts before the bare name: the bare name is the one counted.
            let sameSecond = real[0].replacingOccurrences(of: "Z.nu11vlt", with: "Z-2.nu11vlt")
            w.store.objects[sameSecond] = w.store.objects[real[0]]
            let planted = [stranger, unsigned, changedName, copyName, sameSecond]

            var notCounted: [String: String] = [:]
            let report = try w.prune(keepLast: 2, trust: SignerTrust(keys: [ours.publicKey]),
                                     notices: { if case .notCounted(let n) = $0 { notCounted[n.path] = n.reason } })
            #expect(report.decision.keep.map(\.archive.path) == real.prefix(2).map(w.store.location))
            #expect(report.deleted == [w.store.location(of: real[2])])
            #expect(Set(notCounted.keys) == Set(planted.map(w.store.location)), "\(notCounted)")
            #expect(notCounted[w.store.location(of: copyName)]?.contains("copy of another night") == true)
            #expect(notCounted[w.store.location(of: changedName)]?.contains("signature does not verify") == true)
            #expect(notCounted[w.store.location(of: sameSecond)]?.contains("already counted") == true)
            #expect(planted.allSatisfy { w.store.objects[$0] != nil } && w.store.fetched == [real[0]])
            // Without the rule, a stranger's unsigned password-less archive still does not count,
            // and the changed header does not read as an archive.
            let unruled = try w.prune(keepLast: 5, dryRun: true)
            #expect(unruled.unreadable == [w.store.location(of: changedName)])
        }
    }

    @Test("another user's objects are never read or deleted; when they are all there is, prune says so (78)")
    func foreignObjects() throws {
        try withTemporaryDirectory { dir in
            let w = try PruneWorld(dir: dir)
            let names = try (0..<3).map { try w.put(daysAgo: Double($0)) }
            for name in names { w.store.foreign[name] = 65534 }
            expectArchiveError("othersArchives", kind: .configuration) { _ = try w.prune(keepLast: 1) }
            #expect(w.store.headerReads.isEmpty && w.store.objects.count == 3)
            w.store.foreign[names[2]] = nil
            let report = try w.prune(keepLast: 1)
            #expect(report.foreign.count == 2 && report.deleted.isEmpty)
        }
    }

    @Test("a newer file with an archive's name that does not read stops the prune: nothing is deleted")
    func newerUnreadable() throws {
        try withTemporaryDirectory { dir in
            let w = try PruneWorld(dir: dir)
            for day in 1...3 { try w.put(daysAgo: Double(day)) }
            let garbage = ArchiveRetention.fileName(for: Date())
            w.store.objects[garbage] = randomBytes(5_000)
            expectArchiveError("newestUnreadable", kind: .damaged) { _ = try w.prune(keepLast: 1) }
            #expect(w.store.objects.count == 4)
        }
    }

    @Test("the newest archive damaged: nothing is deleted, and the error says the newest did not verify")
    func newestDamaged() throws {
        try withTemporaryDirectory { dir in
            let w = try PruneWorld(dir: dir)
            let names = try (0..<3).map { try w.put(daysAgo: Double($0)) }
            var bytes = w.store.objects[names[0]]!
            bytes[bytes.count / 2] ^= 0x01   // inside the 70,000-byte photo's data
            w.store.objects[names[0]] = bytes
            let error = expectArchiveError(["newestNotVerified"], kind: nil) { _ = try w.prune(keepLast: 1) }
            #expect(error?.description.contains("the newest archive did not verify, so nothing was deleted") == true, "\(String(describing: error))")
            #expect(w.store.objects.count == 3)
        }
    }

    @Test("a delete that fails midway says how many were deleted before it; the lock held elsewhere stops everything first")
    func failures() throws {
        try withTemporaryDirectory { dir in
            let w = try PruneWorld(dir: dir)
            for day in 0..<5 { try w.put(daysAgo: Double(day)) }
            w.store.lockHeldElsewhere = true
            expectArchiveError("directoryLock", kind: .busy) { _ = try w.prune(keepLast: 1) }
            #expect(w.store.headerReads.isEmpty && w.store.objects.count == 5)

            w.store.lockHeldElsewhere = false
            w.store.deletesBeforeFailure = 2
            let error = expectArchiveError(["deleteFailed"], kind: .ioFailure) { _ = try w.prune(keepLast: 1) }
            #expect(error?.description.contains("(2 older archive(s) were deleted before this)") == true, "\(String(describing: error))")
            #expect(w.store.objects.count == 3)
            #expect(!w.store.locked)
        }
    }

    @Test("leftovers of failed writes are removed under the lock (a dry run only counts them)")
    func leftovers() throws {
        try withTemporaryDirectory { dir in
            let w = try PruneWorld(dir: dir)
            try w.put(daysAgo: 0)
            w.store.leftovers = [".n11tmp-x.1", ".n11tmp-y.2"]
            var counted: [Int] = []
            _ = try w.prune(keepLast: 1, dryRun: true, notices: { if case .leftovers(let n) = $0 { counted.append(n) } })
            #expect(counted == [2] && w.store.leftovers.count == 2)
            _ = try w.prune(keepLast: 1, notices: { if case .leftovers(let n) = $0 { counted.append(n) } })
            #expect(counted == [2, 2] && w.store.leftovers.isEmpty)
        }
    }
}
