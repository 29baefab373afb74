import Foundation
import Glibc
import Synchronization
import Testing
@testable import N11System
import N11TestSupport

private struct GivenUp: Error {}

/// `DirectFileWriter`: restored photos' content files written around the page cache.
@Suite("DirectFileWriter: large files written around the page cache, whole and in order")
struct DirectFileWriterTests {
    func scratch(in parent: String = NSTemporaryDirectory(), _ body: (String) throws -> Void) throws {
        var template = Array((parent + "/n11-direct-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        let dir = try #require(made.map { String(cString: $0) })
        defer { _ = try? FileManager.default.removeItem(atPath: dir) }
        try body(dir)
    }

    func pattern(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &+ $0 >> 12) }
    }

    /// Writes `bytes` to a new file at `path` in pieces of the sizes `pieces` cycles through.
    @discardableResult
    func write(_ bytes: [UInt8], to path: String, through buffers: DirectWriteBuffers,
               pieces: [Int] = [1, 4096, 5000, 8195, 1 << 20]) throws -> Bool {
        let file = try FileDescriptor.createExclusive(path, mode: 0o600)
        var writer: DirectFileWriter?
        try DirectFileWriter.writing(to: file, through: buffers, then: { try $0.close() }) { sink in
            writer = sink
            var at = 0, piece = 0
            while at < bytes.count {
                let n = min(pieces[piece % pieces.count], bytes.count - at)
                try sink.write(bytes[at..<at + n])
                at += n
                piece += 1
            }
        }
        try buffers.waitForWrites()
        return try #require(writer).wroteDirectly
    }

    @Test("files of every size around a block and a buffer read back byte for byte, one set of buffers for all")
    func sizesAroundTheEdges() throws {
        try scratch { dir in
            // Two blocks a buffer: many hand-overs in small files.
            let buffers = DirectWriteBuffers(capacity: 8192, holdsPlaintext: false)
            let sizes = [0, 1, 4095, 4096, 4097, 8191, 8192, 8193, 16384, 3 * 8192 + 4096 + 5, 100_000]
            for (n, size) in sizes.enumerated() {
                let path = "\(dir)/f\(n)"
                let bytes = pattern(size, seed: UInt8(n))
                try write(bytes, to: path, through: buffers)
                let back = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
                #expect(back == bytes, "size \(size)")
            }
        }
    }

    @Test("whole blocks bypass the page cache on ext4, XFS and btrfs; elsewhere the file goes through it")
    func aroundThePageCache() throws {
        try scratch { dir in
            let path = "\(dir)/photo"
            let bytes = pattern(3 << 20 + 100, seed: 9)
            let direct = try write(bytes, to: path, through: DirectWriteBuffers(holdsPlaintext: false))
            let cached = try residentPages(path)
            if try takesDirectIO(dir) {
                #expect(direct)
                // Only the last, partial block was written through the page cache.
                #expect(cached.resident <= 1, "\(cached.resident) of \(cached.pages) pages cached")
            } else {
                #expect(!direct)
            }
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) == bytes)
        }
    }

    @Test("on tmpfs the file is written through the page cache, whole")
    func tmpfsFallsBack() throws {
        let shm = "/dev/shm"
        try #require(try fileSystemMagic(shm) == 0x0102_1994, "/dev/shm is not a tmpfs here")
        try scratch(in: shm) { dir in
            let bytes = pattern(2 << 20 + 4096 + 1, seed: 3)
            let direct = try write(bytes, to: "\(dir)/f", through: DirectWriteBuffers(holdsPlaintext: false))
            #expect(!direct)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(dir)/f"))) == bytes)
        }
    }

    @Test("buffers that hold plaintext are wiped after each file, whether it was written or given up")
    func plaintextWiped() throws {
        try scratch { dir in
            let buffers = DirectWriteBuffers(capacity: 64 << 10, holdsPlaintext: true)
            try write(pattern(200_000, seed: 5), to: "\(dir)/exported", through: buffers)
            #expect(buffers.isClear)
            let file = try FileDescriptor.createExclusive("\(dir)/given-up", mode: 0o600)
            defer { try? file.close() }
            #expect(throws: GivenUp.self) {
                try DirectFileWriter.writing(to: file, through: buffers, then: { _ in Issue.record("completion of a file given up") }) { sink in
                    try sink.write(pattern(100_000, seed: 6)[...])
                    throw GivenUp()
                }
            }
            #expect(buffers.isClear)
            // A vault's content files are ciphertext: those buffers are left as they are.
            let kept = DirectWriteBuffers(capacity: 64 << 10, holdsPlaintext: false)
            try write(pattern(200_000, seed: 7), to: "\(dir)/sealed", through: kept)
            #expect(!kept.isClear)
        }
    }

    @Test("a body that throws waits for the write under way; a failed write is reported, at once or by the next wait; the buffers then serve the next file")
    func failuresLeaveNothingRunning() throws {
        try scratch { dir in
            let buffers = DirectWriteBuffers(capacity: 64 << 10, holdsPlaintext: true)
            let given = try FileDescriptor.createExclusive("\(dir)/given-up", mode: 0o600)
            #expect(throws: GivenUp.self) {
                try DirectFileWriter.writing(to: given, through: buffers, then: { _ in Issue.record("completion of a file given up") }) { sink in
                    try sink.write(pattern(5 << 20, seed: 1)[...])
                    throw GivenUp()
                }
            }
            // Nothing writes to it any more: its size stays what the finished writes made it.
            let size = try given.status().size
            usleep(50_000)
            #expect(try given.status().size == size)
            try given.close()

            // A descriptor open for reading only: the first write fails, and says so.
            let path = "\(dir)/read-only"
            try Data([1]).write(to: URL(fileURLWithPath: path))
            let readOnly = try FileDescriptor.openForReading(path)
            #expect(throws: SystemError.self) {
                try DirectFileWriter.writing(to: readOnly, through: buffers, then: { try $0.close() }) { sink in
                    try sink.write(pattern(1 << 20, seed: 2)[...])
                }
            }
            try readOnly.close()

            // A file small enough to be all in its last job: `writing` returns, and the
            // failure comes from the next wait, naming the file; its completion did not run.
            let late = try FileDescriptor.openForReading(path)
            let completed = Mutex(false)
            try DirectFileWriter.writing(to: late, through: buffers, then: { _ in completed.withLock { $0 = true } }) { sink in
                try sink.write(pattern(100, seed: 8)[...])
            }
            do {
                try buffers.waitForWrites()
                Issue.record("a write to a read-only descriptor was not reported")
            } catch let error as SystemError {
                #expect(error.path == path)
            }
            #expect(!completed.withLock { $0 })
            #expect(buffers.isClear)

            // The same failure, and then the next file's body stops on an error of its own
            // (a damaged item a salvage would skip) before writing anything: the earlier
            // file's failure is the one thrown, not lost.
            let short = try FileDescriptor.openForReading(path)
            try DirectFileWriter.writing(to: short, through: buffers, then: { try $0.close() }) { sink in
                try sink.write(pattern(100, seed: 9)[...])
            }
            let damaged = try FileDescriptor.createExclusive("\(dir)/damaged", mode: 0o600)
            do {
                try DirectFileWriter.writing(to: damaged, through: buffers, then: { try $0.close() }) { sink in
                    try sink.write(pattern(10, seed: 10)[...])
                    throw GivenUp()
                }
                Issue.record("nothing thrown")
            } catch let error as SystemError {
                #expect(error.path == path)
            } catch {
                Issue.record("the body's error hid the earlier failed write: \(error)")
            }
            try damaged.close()
            try buffers.waitForWrites()

            let bytes = pattern(3 << 20 + 17, seed: 4)
            try write(bytes, to: "\(dir)/next", through: buffers)
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(dir)/next"))) == bytes)
        }
    }
}
