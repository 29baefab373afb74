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
    /// Whether it takes streamed uploads (rclone's PutStream).
    var streams = true
    /// Whether it keeps SHA-1 (sftp's `sha1sum`) where it keeps no SHA-256.
    var keepsSHA1 = false
    /// Its hashes are what an uploader declared (S3, B2), not computed from what it stores.
    var hashesDeclared = false
    /// A streamed upload (only) stores this many bytes, then fails.
    var cutStreamAfter: Int?
    /// A streamed upload's writes block until it is interrupted, then fail.
    var stallStreams = false
    /// Each write of a streamed upload takes this long (a link slower than the disk).
    var streamWriteSeconds = 0.0
    /// How often the local file was hashed by the remote's kind of hash (`rclone hashsum`).
    private(set) var localHashes = 0
    /// Bytes that streamed uploads took, in all.
    private(set) var streamedBytes = 0
    /// The archive uploads, by temp name, in order: streamed ones and whole ones.
    private(set) var uploads: [String] = []
    private(set) var streamedUploads: [String] = []

    fileprivate func locked<T>(_ body: () throws -> T) rethrows -> T {
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

    func remoteHashes(_ remote: RemotePath, types: [String]?) throws(ArchiveError) -> [String: String] {
        guard let bytes = self[remote.description] else { throw failure(remote, "object not found") }
        var hashes: [String: String] = [:]
        if hasSHA256, types?.contains("sha256") ?? true { hashes["sha256"] = sha256Hex(bytes) }
        if keepsSHA1, types?.contains("sha1") ?? true { hashes["sha1"] = try? Self.sha1Hex(bytes) }
        return hashes
    }

    func uploadFeatures(of directory: RemotePath) -> UploadFeatures? {
        UploadFeatures(streams: streams, hashes: (hasSHA256 ? ["sha256"] : []) + (keepsSHA1 ? ["sha1"] : []),
                       hashesFromContent: !hashesDeclared)
    }

    func startStreamingUpload(to remote: RemotePath) throws(ArchiveError) -> any StreamingUpload {
        locked {
            uploads.append(remote.name)
            streamedUploads.append(remote.name)
            // As over sftp, the object exists (empty) once the upload has started.
            objects[remote.description] = ([], Date())
        }
        return Stream(remote: self, path: remote)
    }

    /// A streamed upload: the object grows under its name as bytes come, as on a server
    /// that writes what it receives (a cut or abandoned upload leaves what came).
    final class Stream: StreamingUpload, @unchecked Sendable {
        let remote: MemoryRemote
        let path: RemotePath
        var bytes: [UInt8] = []
        let interrupted = DispatchSemaphore(value: 0)

        init(remote: MemoryRemote, path: RemotePath) {
            self.remote = remote
            self.path = path
        }

        func write(_ more: ArraySlice<UInt8>) throws(ArchiveError) {
            if remote.stallStreams {
                interrupted.wait()
                throw remote.failure(path, "ended while stalled")
            }
            if remote.streamWriteSeconds > 0 { usleep(UInt32(remote.streamWriteSeconds * 1e6)) }
            bytes.append(contentsOf: more)
            remote.locked { remote.streamedBytes += more.count }
            if let cut = remote.cutUploadAfter ?? remote.cutStreamAfter, bytes.count > cut {
                remote[path.description] = Array(bytes.prefix(cut))
                throw remote.failure(path, "the connection dropped")
            }
            remote[path.description] = bytes
        }

        func finish() throws(ArchiveError) {
            if remote.corruptUploads, !bytes.isEmpty { bytes[bytes.count / 2] ^= 0x01 }
            remote[path.description] = bytes
        }

        func abandon() {}
        func interrupt(force: Bool) { interrupted.signal() }
    }

    func localHash(_ path: String, type: String) throws(ArchiveError) -> String {
        locked { localHashes += 1 }
        guard type == "sha1", keepsSHA1 else { throw failure(RemotePath(remote: "local", path: path), "this remote has no \(type)") }
        do { return try Self.sha1Hex(readBytes(path)) } catch { throw failure(RemotePath(remote: "local", path: path), "cannot read") }
    }

    static func sha1Hex(_ bytes: [UInt8]) throws -> String {
        let digest = try SHA1Digest()
        digest.update(bytes[...])
        return try digest.finish().hex
    }

    func sha256ByReading(_ remote: RemotePath) throws(ArchiveError) -> String {
        guard let bytes = self[remote.description] else { throw failure(remote, "object not found") }
        return sha256Hex(bytes)
    }

    func prefix(_ remote: RemotePath, count: Int) throws(ArchiveError) -> [UInt8] {
        guard let bytes = self[remote.description] else { throw failure(remote, "object not found") }
        return Array(bytes.prefix(count))
    }

    /// A streamed download from offset 0 gives this many bytes, then fails.
    var cutDownloadAfter: Int?
    /// A streamed download from offset 0 gives a byte in its middle changed (a transfer that
    /// went wrong), and succeeds.
    var corruptDownloads = false
    /// A streamed download from offset 0 stops at this byte until `releaseDownloads()` (or
    /// 30 s: a reader that needs more must fail its test, not hang it).
    var holdDownloadsAt: Int?
    private let downloadsReleased = DispatchSemaphore(value: 0)
    /// Whether a download is stopped at `holdDownloadsAt` now.
    var isHoldingADownload: Bool { locked { holding } }
    private var holding = false
    /// The ranges streamed downloads were started for, in order: offset and count (nil: to the end).
    private(set) var downloadRanges: [(offset: Int64, count: Int64?)] = []

    func releaseDownloads() { downloadsReleased.signal() }

    func startStreamingDownload(of remote: RemotePath, offset: Int64, count: Int64?) throws(ArchiveError) -> any StreamingDownload {
        // As `rclone cat`, it starts whether or not the object is there, and fails on reading.
        let bytes = self[remote.description]
        locked { downloadRanges.append((offset, count)) }
        let start = min(bytes?.count ?? 0, Int(offset))
        let end = count.map { min(bytes?.count ?? 0, start + Int($0)) } ?? bytes?.count ?? 0
        var range = bytes.map { Array($0[start..<end]) }
        if corruptDownloads, offset == 0, let count = range?.count, count > 0 { range?[count / 2] ^= 0x01 }
        return Download(remote: self, path: remote, bytes: range, fromStart: offset == 0)
    }

    /// A streamed download, in blocks of 64 KiB.
    final class Download: StreamingDownload, @unchecked Sendable {
        let remote: MemoryRemote
        let path: RemotePath
        /// nil: no such object.
        let object: [UInt8]?
        let fromStart: Bool
        var position = 0
        var held = false

        init(remote: MemoryRemote, path: RemotePath, bytes: [UInt8]?, fromStart: Bool) {
            self.remote = remote
            self.path = path
            object = bytes
            self.fromStart = fromStart
        }

        func receive(into file: FileDescriptor, at offset: Int64, count: Int) throws(ArchiveError) -> Int {
            var buffer = [UInt8](repeating: 0, count: count)
            let n = try read(into: &buffer, count: count)
            do { try file.write(buffer[0..<n], at: offset) } catch { throw remote.failure(path, "cannot write") }
            return n
        }

        func isAtEnd() throws(ArchiveError) -> Bool {
            var probe = [UInt8](repeating: 0, count: 1)
            return try read(into: &probe, count: 1) == 0
        }

        func read(into buffer: inout [UInt8], count: Int) throws(ArchiveError) -> Int {
            guard let bytes = object else { throw remote.failure(path, "object not found") }
            if fromStart, let cut = remote.cutDownloadAfter, position >= cut { throw remote.failure(path, "the connection dropped") }
            if fromStart, !held, let hold = remote.holdDownloadsAt, position >= hold {
                held = true
                remote.locked { remote.holding = true }
                _ = remote.downloadsReleased.wait(timeout: .now() + 30)
                remote.locked { remote.holding = false }
            }
            var n = min(count, 64 << 10, bytes.count - position)
            if fromStart, let cut = remote.cutDownloadAfter { n = min(n, cut - position) }
            if fromStart, !held, let hold = remote.holdDownloadsAt { n = min(n, hold - position) }
            buffer.replaceSubrange(0..<n, with: bytes[position..<(position + n)])
            position += n
            return n
        }

        func finish() throws(ArchiveError) {}
        func abandon() {}
    }
}

/// A vault, a home, and `create` to a directory on an in-memory remote.
struct PublishWorld {
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

    func create(name: String? = nil, lockWait: Double = 0, notices: ((PublishNotice) -> Void)? = nil,
                uploadProgress: ArchiveProgress? = nil) throws -> ArchiveBackup.Report {
        let store = RcloneStore(directory, spool: nil, home: home, rclone: remote)
        let publishing = PublishOptions(lockWait: lockWait, progress: uploadProgress, notice: notices ?? { _ in })
        return try ArchiveBackup.run(from: world.vault, .init(mode: .portable, compartments: [.vault], kdf: fastKDF,
                                                              destination: .store(store, name: name, publishing),
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
    @Test("an upload, streamed while the archive is written or sent once it is complete, checked by the remote's SHA-256 or read back without one, is moved to a free dated name and recorded",
          arguments: [true, false], [true, false])
    func publishes(hasSHA256: Bool, streams: Bool) throws {
        do {
            try withTemporaryDirectory { dir in
                let w = try PublishWorld(dir: dir)
                w.remote.hasSHA256 = hasSHA256
                w.remote.streams = streams
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
                #expect(w.remote.streamedUploads.count == (streams ? 1 : 0))
                #expect(report.upload?.whileWritten == streams)
                #expect(w.remote.streamedBytes == (streams ? Int(report.archive?.archiveBytes ?? -1) : 0))
                #expect(((try? FileManager.default.contentsOfDirectory(atPath: w.spool)) ?? []).isEmpty, "the spooled copy is gone")
                #expect(WrittenArchives.all(in: w.home).map(\.location) == [report.location])
                #expect(notices.count == 2)
            }
        }
    }

    @Test("the upload bar of a streamed upload starts from what was sent while the archive was written and moves with every block after")
    func streamedUploadBar() throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            w.remote.streams = true
            w.remote.streamWriteSeconds = 0.05
            // One large entry: libzip declares it final only once it is whole, so most of the
            // archive goes in a pass that begins about when it is complete, on a link slower
            // than the disk (50 ms a 1 MiB block).
            _ = try w.world.vault.add(photo(randomBytes(6 << 20), name: "large.jpg"))
            let recorder = ProgressRecorder()
            let report = try w.create(uploadProgress: recorder.observer())
            #expect(report.upload?.whileWritten == true)
            let snapshots = recorder.snapshots
            let first = try #require(snapshots.first), last = try #require(snapshots.last)
            #expect(first.bytesAtBegin == first.bytes && first.bytes < last.bytes)
            #expect(last.finished && last.bytes == last.totalBytes && last.items == 1)
            // At 1 MiB a block, the bar moves on the way through the 6 MiB pass (it jumped
            // from where it began to the end when the pass was counted whole).
            let between = Set(snapshots.map(\.bytes)).filter { $0 > first.bytes && $0 < last.bytes }
            #expect(between.count >= 3, "\(snapshots.map(\.bytes))")
            #expect(zip(snapshots, snapshots.dropFirst()).allSatisfy { $0.bytes <= $1.bytes })
        }
    }

    @Test("a streamed upload cut short: its temp object is taken back, the archive is uploaded whole from the spool and published")
    func streamCut() throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            w.remote.cutStreamAfter = 1000
            var notices: [String] = []
            let report = try w.create(notices: { notices.append("\($0)") })
            #expect(notices.contains { $0.contains("streamFailed") && $0.contains("connection dropped") }, "\(notices)")
            #expect(report.upload?.whileWritten == false)
            #expect(w.remote.uploads.count == 2 && w.remote.streamedUploads.count == 1 && w.remote.uploads[0] != w.remote.uploads[1],
                    "streamed, then uploaded whole under a second temp name: \(w.remote.uploads)")
            #expect(Set(w.remote.names(in: w.directory)) == ["README", String(report.location.split(separator: "/").last!)],
                    "the cut stream's temp object is gone")
            #expect(sha256Hex(try #require(w.remote[report.location])) == report.archive?.sha256)
        }
    }

    @Test("a remote that keeps SHA-1 (sftp): a streamed upload is checked by the SHA-1 taken on the way, without hashing the file again; a whole upload hashes the file; a changed byte is caught either way",
          arguments: [true, false])
    func sha1Remote(streams: Bool) throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            w.remote.hasSHA256 = false
            w.remote.keepsSHA1 = true
            w.remote.streams = streams
            let report = try w.create()
            #expect(report.upload?.checkedBy == "sha1")
            #expect(w.remote.localHashes == (streams ? 0 : 1))
            #expect(sha256Hex(try #require(w.remote[report.location])) == report.archive?.sha256)
        }
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            w.remote.hasSHA256 = false
            w.remote.keepsSHA1 = true
            w.remote.streams = streams
            w.remote.corruptUploads = true
            #expect { try w.create() } throws: { error in "\(error)".contains("the uploaded copy differs from the archive that was sent") }
            w.expectNothingLeft()
        }
    }

    @Test("a remote whose hashes are declared by the uploader (S3, B2) gets the whole file, so its hash checks it; one without hashes is streamed and read back")
    func declaredHashes() throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            w.remote.hashesDeclared = true
            w.remote.hasSHA256 = false
            w.remote.keepsSHA1 = true
            let report = try w.create()
            #expect(w.remote.streamedUploads.isEmpty && report.upload?.whileWritten == false)
            #expect(report.upload?.checkedBy == "sha1" && w.remote.localHashes == 1)
        }
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            w.remote.hashesDeclared = true
            w.remote.hasSHA256 = false
            let report = try w.create()
            #expect(w.remote.streamedUploads.count == 1 && report.upload?.whileWritten == true)
            #expect(report.upload?.checkedBy == "read-back")
        }
    }

    @Test("a create that fails while its upload streams: the stream is ended and its temp object deleted; nothing is left")
    func createFailsWhileStreaming() throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            // The last photo in ID order is damaged: the create stops while it writes the pack
            // (the stream has started by then: it starts before the archive is planned, and
            // its temp object exists from its start).
            var added: [ItemMetadata] = []
            for index in 0..<4 { added.append(try w.world.vault.add(photo(randomBytes(1_500_000), name: "big\(index).jpg"))) }
            let last = try #require(added.max { $0.id < $1.id })
            let path = w.world.vault.contentPath(of: last)
            var content = try readBytes(path)
            content[content.count - 3] ^= 0x80
            try writeBytes(content, to: path)
            #expect { try w.create() } throws: { error in "\(error)".contains(last.id) }
            #expect(w.remote.streamedUploads.count == 1, "the upload had started")
            w.expectNothingLeft()
        }
    }

    @Test("a stream is not usable when the writer voids what it declared final, or the archive ends past what was declared: finish says so, so the file is uploaded whole")
    func streamNotUsable() throws {
        try withTemporaryDirectory { dir in
            let remote = MemoryRemote()
            let file = dir + "/archive"
            let bytes = randomBytes(300_000)
            try writeBytes(bytes, to: file)
            let descriptor = try FileDescriptor.openForReading(file)
            let temp = RemotePath(remote: "mem", path: "d/.n11tmp-x")

            let complete = StreamedUpload(to: temp, transport: remote)
            complete.attach(descriptor)
            complete.prefixIsFinal(upTo: 300_000)
            guard case .sent = complete.finish(size: 300_000) else { Issue.record("a whole declared file was not sent"); return }
            #expect(remote[temp.description] == bytes)

            let voided = StreamedUpload(to: temp, transport: remote)
            voided.attach(descriptor)
            voided.prefixIsFinal(upTo: 100_000)
            voided.finalPrefixWasRewritten()
            voided.prefixIsFinal(upTo: 300_000)
            guard case .notSent(let why, _) = voided.finish(size: 300_000) else { Issue.record("a voided stream was sent"); return }
            #expect(why.contains("declared final"), "\(why)")

            let short = StreamedUpload(to: temp, transport: remote)
            short.attach(descriptor)
            short.prefixIsFinal(upTo: 200_000)
            guard case .notSent(let shortWhy, let started) = short.finish(size: 300_000) else {
                Issue.record("a stream of part of the archive was sent as the whole"); return
            }
            #expect(shortWhy.contains("declared final") && started, "\(shortWhy)")
        }
    }

    @Test("a stalled streamed upload is ended at once when the archive fails: abandon does not wait for the remote")
    func abandonStalled() throws {
        try withTemporaryDirectory { dir in
            let remote = MemoryRemote()
            remote.stallStreams = true
            let file = dir + "/archive"
            try writeBytes(randomBytes(300_000), to: file)
            let descriptor = try FileDescriptor.openForReading(file)
            let upload = StreamedUpload(to: RemotePath(remote: "mem", path: "d/.n11tmp-x"), transport: remote)
            upload.attach(descriptor)
            upload.prefixIsFinal(upTo: 300_000)
            // The thread is blocked in a write once the stream object exists and took nothing.
            for _ in 0..<500 where remote.streamedUploads.isEmpty { usleep(10_000) }
            usleep(50_000)
            let ended = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var started = false
            Thread { started = upload.abandon(); ended.signal() }.start()
            #expect(ended.wait(timeout: .now() + 10) == .success, "abandon waited on the stalled remote")
            #expect(started, "the upload had started, so its temp object may exist")
            #expect(remote.streamedBytes == 0)
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
