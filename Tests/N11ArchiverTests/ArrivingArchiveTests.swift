import Foundation
import Testing
@testable import N11Archiver
import N11Crypto
import N11System
import N11TestSupport
import N11Vault

/// Restoring from a remote while the archive downloads (issue 29): what is read before the
/// download ends, and what a download that fails or a ZIP that only the whole file shows to
/// be inconsistent leave behind.
@Suite("An archive read as it downloads")
struct ArrivingArchiveTests {
    /// A published archive of the world's vault plus a 3 MiB photo (so that its last 1 MiB
    /// comes in a download of its own), and its size.
    private func published(_ w: PublishWorld) throws -> (location: String, size: Int) {
        _ = try w.world.vault.add(photo(randomBytes(3 << 20), name: "large.jpg"))
        let report = try w.create()
        return (report.location, try #require(w.remote[report.location]).count)
    }

    private func open(_ arriving: ArrivingArchive) throws -> UnlockedArchive {
        try arriving.reportingItsFailure {
            try ArchiveReader(arriving: arriving).unlock(password: { try secret(testPassword) }, keyStore: { throw NoKeyStore() })
        }
    }

    /// Exports `location` into `dir/export` while it downloads, as `restore --export` does,
    /// and takes the download back after.
    private func exportAsItArrives(_ location: String, of w: PublishWorld, into dir: String) throws -> ArchiveRestorer.Report {
        let arriving = try #require(try ArchiveStores.startFetching(location, spool: nil, home: w.home, rclone: w.remote))
        defer { arriving.cancel() }
        return try arriving.reportingItsFailure {
            try ArchiveExporter.export(try open(arriving), to: dir + "/export", keyStore: nil)
        }
    }

    /// Each vault item's plaintext by name.
    private func contents(of vault: Vault) throws -> [String: [UInt8]] {
        var result: [String: [UInt8]] = [:]
        for item in try vault.items() { result[item.name] = try plaintext(of: item, in: vault) }
        return result
    }

    @Test("opening and unlocking read only the start and the end: they finish while the rest has not come; the export then holds every item")
    func readsBeforeTheDownloadEnds() throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            let (location, size) = try published(w)
            w.remote.holdDownloadsAt = 128 << 10
            let arriving = try #require(try ArchiveStores.startFetching(location, spool: nil, home: w.home, rclone: w.remote))
            defer { arriving.cancel() }
            // The whole from byte 0, and its last MiB beside it.
            #expect(w.remote.downloadRanges.map(\.offset) == [0, Int64(size) - ArrivingArchive.tailBytes])
            #expect(w.remote.downloadRanges.map(\.count) == [nil, nil])
            // The body is held at 128 KiB: an open that needed more would return only once
            // the hold ends (after 30 s).
            let archive = try open(arriving)
            #expect(w.remote.isHoldingADownload, "opened and unlocked while the body was held at 128 KiB")
            #expect(arriving.file.failure == nil)
            w.remote.releaseDownloads()
            let target = dir + "/export"
            let report = try arriving.reportingItsFailure {
                try ArchiveExporter.export(archive, to: target, keyStore: nil)
            }
            #expect(report.written == 3)
            var exported: [String: [UInt8]] = [:]
            for folder in try FileManager.default.contentsOfDirectory(atPath: target) {
                for file in try FileManager.default.contentsOfDirectory(atPath: target + "/" + folder) {
                    exported[file] = try readBytes(target + "/" + folder + "/" + file)
                }
            }
            #expect(exported == (try contents(of: w.world.vault)))
            #expect(try readBytes(arriving.file.path) == (try #require(w.remote[location])), "the spooled copy is the archive")
        }
    }

    @Test("an archive the listing does not show: no download is kept, and the caller falls back to the whole-file fetch that names the problem")
    func notListed() throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            let missing = w.directory.appending("n11archive-missing.nu11vlt").description
            #expect(try ArchiveStores.startFetching(missing, spool: nil, home: w.home, rclone: w.remote) == nil)
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: w.spool)) ?? []).isEmpty, "nothing spooled")
            #expect(try ArchiveStores.startFetching(dir + "/local.nu11vlt", spool: nil, home: w.home, rclone: w.remote) == nil,
                    "a local path is read where it is")
        }
    }

    @Test("a download cut short: the export fails with the remote's error, not as damage, and publishes nothing")
    func cutDownload() throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            let (location, _) = try published(w)
            w.remote.cutDownloadAfter = 1 << 20
            let target = dir + "/export"
            #expect { try exportAsItArrives(location, of: w, into: dir) } throws: { error in
                guard let error = error as? ArchiveError, case .remote(_, let why, let kind, _) = error else { return false }
                return kind == .ioFailure && why.contains("connection dropped")
            }
            #expect(!FileManager.default.fileExists(atPath: target), "the export's directory is taken back")
        }
    }

    @Test("a byte changed on the way (rclone cat checks no hash): an I/O failure naming the remote's hash, not damage, where the remote keeps one; damage where it keeps none",
          arguments: [true, false])
    func changedOnTheWay(hasSHA256: Bool) throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            let (location, _) = try published(w)
            w.remote.hasSHA256 = hasSHA256
            w.remote.corruptDownloads = true
            let target = dir + "/export"
            #expect { try exportAsItArrives(location, of: w, into: dir) } throws: { error in
                guard let error = error as? ArchiveError else { return false }
                if hasSHA256, case .remote(_, let why, .ioFailure, _) = error { return why.contains("sha256") }
                return !hasSHA256 && error.kind == .damaged
            }
            #expect(!FileManager.default.fileExists(atPath: target))
        }
    }

    @Test("a local header that disagrees with the central directory: reading through the directory works, the check of the whole file refuses it before anything is published")
    func wholeFileChecked() throws {
        try withTemporaryDirectory { dir in
            let w = try PublishWorld(dir: dir)
            let (location, _) = try published(w)
            // The root's name in its local header (the first of its two occurrences; the
            // second is the central directory's), changed to another of the same length.
            var bytes = try #require(w.remote[location])
            let name = Array("Manifest/root.n11".utf8)
            let at = try #require(bytes.indices.first { bytes[$0..<min(bytes.count, $0 + name.count)].elementsEqual(name) })
            bytes[at + name.count - 1] = UInt8(ascii: "2")
            w.remote[location] = bytes
            let target = dir + "/export"
            #expect { try exportAsItArrives(location, of: w, into: dir) } throws: { error in (error as? ArchiveError)?.kind == .damaged }
            #expect(!FileManager.default.fileExists(atPath: target))
            // The same bytes read as a whole file are refused when opened.
            try AtomicFile.write(bytes, to: dir + "/whole.nu11vlt", mode: 0o600, replaceExisting: false)
            #expect(throws: ArchiveError.self) { try ArchiveReader(path: dir + "/whole.nu11vlt") }
        }
    }

    @Test("a reader waiting for bytes that have not come gets them when they do, and the download's failure when it fails")
    func waitsAndFails() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/file"
            try AtomicFile.write(Array(repeating: 7, count: 100), to: path, mode: 0o600, replaceExisting: true)
            let file = try ArrivingFile(path: path, size: 100, tailStart: 80)
            let tailRead = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var tailBytes = 0
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 20)
                tailBytes = (try? buffer.withUnsafeMutableBytes { try file.read(into: $0.baseAddress!, count: 20, at: 80) }) ?? -1
                tailRead.signal()
            }
            #expect(tailRead.wait(timeout: .now() + 0.2) == .timedOut, "the tail has not come")
            file.tailArrived()
            #expect(tailRead.wait(timeout: .now() + 10) == .success)
            #expect(tailBytes == 20)
            file.arrived(upTo: 50)
            var buffer = [UInt8](repeating: 0, count: 50)
            #expect(try buffer.withUnsafeMutableBytes { try file.read(into: $0.baseAddress!, count: 50, at: 0) } == 50, "what has come reads at once")
            let bodyRead = DispatchSemaphore(value: 0)
            nonisolated(unsafe) var failed = false
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 10)
                do { _ = try buffer.withUnsafeMutableBytes { try file.read(into: $0.baseAddress!, count: 10, at: 60) } } catch { failed = true }
                bodyRead.signal()
            }
            #expect(bodyRead.wait(timeout: .now() + 0.2) == .timedOut, "bytes 60..<70 have not come")
            file.fail(SystemError("the link broke", path: "remote"))
            #expect(bodyRead.wait(timeout: .now() + 10) == .success)
            #expect(failed)
            #expect(throws: SystemError.self) { try file.waitUntilWhole() }
        }
    }
}
