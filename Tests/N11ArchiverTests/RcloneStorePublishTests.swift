import Foundation
import Testing
@testable import N11Archiver
import N11Crypto
import N11System
import N11TestSupport
import N11Vault

/// A remote in memory, for `RcloneStore`, `RemoteLock` and `RemoteArchives` without a server:
/// objects are byte arrays by `REMOTE:PATH`, and each test sets the failure it needs (an upload
/// cut short, bytes changed on the way, a remote without hashes, another writer's object under
/// the final name, a lock held elsewhere), which a real server cannot be made to do on cue.
final class MemoryRemote: RemoteTransport, @unchecked Sendable {
    private let guardLock = NSLock()
    private var objects: [String: (bytes: [UInt8], modified: Date)] = [:]
    /// Whether the remote has its own SHA-256 (else the upload is read back).
    var hasSHA256 = true
    /// An archive upload (not a lock object's) stores this many bytes, then fails.
    var cutUploadAfter: Int?
    /// An archive upload stores its bytes with one of them changed, and succeeds.
    var corruptUploads = false
    private(set) var uploads: [String] = []

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        guardLock.lock()
        defer { guardLock.unlock() }
        return try body()
    }

    subscript(_ path: String) -> [UInt8]? {
        get { locked { objects[path]?.bytes } }
        set { locked { objects[path] = newValue.map { ($0, Date()) } } }
    }

    /// Puts an object with the time the remote gives it.
    func put(_ path: RemotePath, _ bytes: [UInt8], modified: Date) {
        locked { objects[path.description] = (bytes, modified) }
    }

    /// Every object's name in `directory`, sorted.
    func names(in directory: RemotePath) -> [String] {
        (try? list(directory))?.map(\.name).sorted() ?? []
    }

    func failure(_ remote: RemotePath, _ why: String) -> ArchiveError {
        .remote(location: remote.description, why: why, kind: .ioFailure, hint: nil)
    }

    func list(_ directory: RemotePath) throws(ArchiveError) -> [RemoteObject] {
        locked {
            objects.compactMap { path, object in
                guard let remote = RemotePath.parse(path), remote.parent == directory else { return nil }
                return RemoteObject(name: remote.name, size: Int64(object.bytes.count), modified: object.modified)
            }
        }
    }

    func upload(_ local: String, to remote: RemotePath, progress: ArchiveProgress?, size: Int64) throws(ArchiveError) {
        var bytes: [UInt8]
        do { bytes = try readBytes(local) } catch { throw failure(remote, "cannot read \(local)") }
        let isLock = remote.name.hasPrefix(RemoteLock.prefix)
        if !isLock {
            locked { uploads.append(remote.name) }
            if let cut = cutUploadAfter {
                self[remote.description] = Array(bytes.prefix(cut))
                throw failure(remote, "the connection dropped")
            }
            if corruptUploads { bytes[bytes.count / 2] ^= 0x01 }
        }
        self[remote.description] = bytes
    }

    func download(_ remote: RemotePath, to local: String, progress: ArchiveProgress?, size: Int64) throws(ArchiveError) {
        guard let bytes = self[remote.description] else { throw failure(remote, "object not found") }
        do { try AtomicFile.write(bytes, to: local, mode: 0o600, replaceExisting: true) } catch { throw failure(remote, "cannot write \(local)") }
    }

    func move(_ from: RemotePath, to: RemotePath) throws(ArchiveError) {
        let object = locked { objects.removeValue(forKey: from.description) }
        guard let object else { throw failure(from, "object not found") }
        locked { objects[to.description] = object }
    }

    func delete(_ remote: RemotePath) throws(ArchiveError) {
        guard locked({ objects.removeValue(forKey: remote.description) }) != nil else { throw failure(remote, "object not found") }
    }

    func deleteOnInterrupt(_ remote: RemotePath) { try? delete(remote) }

    func remoteHashes(_ remote: RemotePath) throws(ArchiveError) -> [String: String] {
        guard hasSHA256 else { return [:] }
        return ["sha256": try sha256ByReading(remote)]
    }

    func localHash(_ path: String, type: String) throws(ArchiveError) -> String {
        throw failure(RemotePath(remote: "local", path: path), "this remote has no \(type)")
    }

    func sha256ByReading(_ remote: RemotePath) throws(ArchiveError) -> String {
        guard let bytes = self[remote.description] else { throw failure(remote, "object not found") }
        return sha256Hex(bytes)
    }

    func prefix(_ remote: RemotePath, count: Int) throws(ArchiveError) -> [UInt8] {
        guard let bytes = self[remote.description] else { throw failure(remote, "object not found") }
        return Array(bytes.prefix(count))
    }
}

/// A vault, a home, and `create` to a directory on an in-memory remote.
private struct PublishWorld {
    let world: KeySlotTests.World
    let home: N11Home
    let remote = MemoryRemote()
    let directory = RemotePath(remote: "mem", path: "backups")
    let now = Date(timeIntervalSince1970: 1_795_000_000)

    init(dir: String) throws {
        world = try KeySlotTests.World(dir: dir)
        home = N11Home(root: dir + "/source")
        remote[directory.appending("README").description] = Array("not an archive\n".utf8)
    }

    var spool: String { home.root + "/spool" }

    func create(name: String? = nil, lockWait: Double = 0, notices: ((PublishNotice) -> Void)? = nil) throws -> ArchiveBackup.Report {
        let store = RcloneStore(directory, spool: nil, home: home, rclone: remote)
        return try ArchiveBackup.run(from: world.vault, .init(mode: .portable, compartments: [.vault], kdf: fastKDF,
                                                              destination: .store(store, name: name, .init(lockWait: lockWait, notice: notices ?? { _ in })),
                                                              home: home, now: now), progress: nil) {
            ArchiveAccess(passwords: [try secret(testPassword)], recipients: [], kdf: fastKDF)
        }
    }

    /// What a failed publish must leave: the remote as it was apart from `besides`, no temp
    /// or lock object, nothing in the spool, no record of a written archive.
    func expectNothingLeft(besides: Set<String> = [], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(Set(remote.names(in: directory)) == Set(["README"]).union(besides), sourceLocation: sourceLocation)
        let spooled = (try? FileManager.default.contentsOfDirectory(atPath: spool)) ?? []
        #expect(spooled.isEmpty, "spool: \(spooled)", sourceLocation: sourceLocation)
        #expect(WrittenArchives.all(in: home).isEmpty, sourceLocation: sourceLocation)
    }
}

@Suite("RcloneStore publishing against an in-memory remote: checks, and what a failure leaves")
struct RcloneStorePublishTests {
    @Test("an upload checked by the remote's SHA-256, or read back without one, is moved to a free dated name and recorded")
    func publishes() throws {
        for hasSHA256 in [true, false] {
            try withTemporaryDirectory { dir in
                let w = try PublishWorld(dir: dir)
                w.remote.hasSHA256 = hasSHA256
                let taken = ArchiveRetention.fileName(for: w.now)
                w.remote[w.directory.appending(taken).description] = Array("someone else's".utf8)
                var notices: [PublishNotice] = []
                let report = try w.create(notices: { notices.append($0) })

                let expected = ArchiveRetention.fileName(for: w.now, attempt: 2)
                #expect(report.location == w.directory.appending(expected).description, "the first free dated name")
                #expect(report.upload?.checkedBy == (hasSHA256 ? "sha256" : "read-back"))
                #expect(Set(w.remote.names(in: w.directory)) == ["README", taken, expected], "no temp or lock object stays")
                #expect(w.remote[w.directory.appending(taken).description] == Array("someone else's".utf8), "never replaced")
                let published = try #require(w.remote[report.location])
                #expect(sha256Hex(published) == report.archive?.sha256)
                #expect(w.remote.uploads.count == 1 && w.remote.uploads[0].hasPrefix(RemoteArchives.tempPrefix),
                        "uploaded under a temp name, then moved")
                #expect(((try? FileManager.default.contentsOfDirectory(atPath: w.spool)) ?? []).isEmpty, "the spooled copy is gone")
                #expect(WrittenArchives.all(in: w.home).map(\.location) == [report.location])
                #expect(notices.count == 2)
            }
        }
    }

    @Test("an upload cut short: an error naming the connection, no archive under any name, nothing recorded")
    func uploadCut() throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            w.remote.cutUploadAfter = 1000
            #expect { try w.create() } throws: { error in
                guard let error = error as? ArchiveError, case .remote(_, let why, let kind, _) = error else { return false }
                return why.contains("connection dropped") && kind == .ioFailure
            }
            w.expectNothingLeft()
        }
    }

    @Test("bytes changed on the way, caught by the remote's hash or by reading back: nothing is published")
    func hashMismatch() throws {
        for hasSHA256 in [true, false] {
            try withTemporaryDirectory { dir in
                let w = try PublishWorld(dir: dir)
                w.remote.hasSHA256 = hasSHA256
                w.remote.corruptUploads = true
                #expect { try w.create() } throws: { error in
                    "\(error)".contains("the uploaded copy differs from the archive that was sent")
                }
                w.expectNothingLeft()
            }
        }
    }

    @Test("an object under the name asked for (-o REMOTE:FILE): it stays, ours is taken back (output exists)")
    func nameTaken() throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            let name = "chosen.nu11vlt"
            w.remote[w.directory.appending(name).description] = Array("theirs".utf8)
            #expect { try w.create(name: name) } throws: { error in
                guard let error = error as? ArchiveError, case .outputExists = error else { return false }
                return true
            }
            #expect(w.remote[w.directory.appending(name).description] == Array("theirs".utf8))
            w.expectNothingLeft(besides: [name])
        }
    }

    @Test("a prune's lock in the directory: create says another n11archive is pruning and uploads nothing; a shared lock or a dead one does not stop it")
    func lockHeld() throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            let held = RemoteLock.prefix + "exclusive.other-host.4242.abcdef"
            w.remote[w.directory.appending(held).description] = Array("other-host pid 4242 exclusive\n".utf8)
            #expect { try w.create() } throws: { error in
                guard let error = error as? ArchiveError, case .remote(_, let why, let kind, _) = error else { return false }
                return kind == .busy && why.contains("pruning")
            }
            #expect(w.remote.uploads.isEmpty, "no archive was uploaded")
            w.expectNothingLeft(besides: [held])

            // A shared lock (another create) does not stop a create.
            w.remote[w.directory.appending(held).description] = nil
            let shared = RemoteLock.prefix + "shared.other-host.4243.abcdef"
            w.remote[w.directory.appending(shared).description] = Array("other-host pid 4243 shared\n".utf8)
            let report = try w.create()
            #expect(w.remote[report.location] != nil)
            #expect(w.remote.names(in: w.directory).contains(shared), "another's live lock is left alone")

            // A prune lock a day old is a holder that died: deleted, and the create goes on.
            let dead = RemoteLock.prefix + "exclusive.other-host.4244.abcdef"
            w.remote.put(w.directory.appending(dead), Array("other-host pid 4244 exclusive\n".utf8), modified: Date().addingTimeInterval(-25 * 3600))
            let second = try w.create()
            #expect(w.remote[second.location] != nil && !w.remote.names(in: w.directory).contains(dead))
        }
    }

    @Test("a store of the in-memory remote lists, fetches and deletes what was published, under prune's exclusive lock")
    func roundTrip() throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            let report = try w.create()
            let store = RcloneStore(w.directory, spool: nil, home: w.home, rclone: w.remote)
            let object = try #require(try store.list().first { store.location(of: $0.name) == report.location })
            let fetched = try store.fetch(object, progress: nil)
            #expect(sha256Hex(try readBytes(fetched.path)) == report.archive?.sha256)
            fetched.release()
            let lock = try store.lock(exclusive: true, waitSeconds: 0)
            #expect { _ = try store.lock(exclusive: false, waitSeconds: 0) } throws: { _ in true }
            try store.delete(object)
            lock.release()
            #expect(w.remote.names(in: w.directory) == ["README"], "the archive and both lock objects are gone")
        }
    }
}
