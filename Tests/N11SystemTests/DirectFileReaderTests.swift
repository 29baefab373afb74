import Foundation
import Glibc
import Testing
@testable import N11System
import N11TestSupport

/// `DirectFileReader`: large files out of the page cache read around it.
/// Only where /tmp takes direct I/O (ext4, XFS, btrfs): on tmpfs the reader is never made
/// (`n11_direct_io_suits`), and pages cannot be dropped from the cache to make a file cold.
@Suite("DirectFileReader: large files out of the page cache read around it, whole and in order",
       .enabled(if: (try? takesDirectIO("/tmp")) == true))
struct DirectFileReaderTests {
    func pattern(_ count: Int, seed: UInt8) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ Int(seed) &+ $0 >> 13) }
    }

    /// Everything `source` gives, asked for in pieces of the sizes `pieces` cycles through.
    func readAll(_ source: ByteSource, pieces: [Int] = [12, 1, 4096, 5000, 1 << 20, 8195]) throws -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var piece = 0
        while true {
            let n = try source.read(into: &buffer, offset: 3, count: min(pieces[piece % pieces.count], buffer.count - 3))
            if n == 0 { break }
            out += buffer[3..<3 + n]
            piece += 1
        }
        return out
    }

    /// Whether the open file still reads through the page cache: a one-byte read at an odd
    /// offset, which a file opened for direct I/O refuses (a file of two bytes or more: past
    /// the end even a direct read returns nothing).
    final class Refusals: @unchecked Sendable { var count = 0 }

    /// A new file at `path` holding `bytes`, opened for reading.
    func written(_ bytes: [UInt8], to path: String) throws -> FileDescriptor {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return try FileDescriptor.openForReading(path)
    }

    func readsBuffered(_ file: FileDescriptor) -> Bool {
        var byte: UInt8 = 0
        return pread(file.rawValue, &byte, 1, 1) == 1
    }

    @Test("files of every size around a block read back byte for byte, the blocks directly where the file system takes it")
    func sizesAroundTheEdges() throws {
        try withTemporaryDirectory { dir in
            let sizes = [0, 1, 4095, 4096, 4097, 8191, 8192, 8193, 3 * 8192, 3 * 8192 + 4096 + 5, 100_000]
            for (n, size) in sizes.enumerated() {
                let path = "\(dir)/f\(n)"
                let bytes = pattern(size, seed: UInt8(n))
                let file = try written(bytes, to: path)
                // Two blocks of 8 KiB: the thread waits for the reader and the reader for it.
                let reader = try #require(DirectFileReader(file, blockSize: 8192, blocksAhead: 2), "size \(size)")
                #expect(try readAll(reader) == bytes, "size \(size)")
                var after = [UInt8](repeating: 0, count: 8)
                #expect(try reader.read(into: &after, offset: 0, count: 8) == 0, "size \(size): after the end")
                if size >= 4096 { #expect(reader.directReads > 0, "size \(size)") }
                if size >= 2 { #expect(readsBuffered(file), "size \(size): O_DIRECT left on at the end") }
            }
        }
    }

    @Test("ifUncached: a file in the cache or a small one is read as it is; one out of the cache is read directly and stays out")
    func onlyOutOfTheCache() throws {
        try withTemporaryDirectory { dir in
            let path = "\(dir)/photo"
            let size = Int(DirectFileReader.worthFrom) + 3 << 20 + 123
            let bytes = pattern(size, seed: 4)
            let file = try written(bytes, to: path)
            // Just written: in the cache.
            #expect(DirectFileReader.ifUncached(file, size: Int64(size)) == nil)
            try #require(try dropFromPageCache(path), "this file system keeps pages after POSIX_FADV_DONTNEED; the test cannot tell")
            // Out of the cache, but said to be smaller than is worth it.
            #expect(DirectFileReader.ifUncached(file, size: DirectFileReader.worthFrom - 1) == nil)
            let reader = try #require(DirectFileReader.ifUncached(file, size: Int64(size)))
            #expect(try readAll(reader) == bytes)
            #expect(reader.directReads >= size >> 20)
            // A read through the cache would leave all 1,793 pages there; asking whether the
            // middle page was cached reads none.
            let cached = try residentPages(path)
            #expect(cached.resident == 0, "\(cached.resident) of \(cached.pages) pages cached")
            #expect(readsBuffered(file))
        }
    }

    @Test("a reader let go in the middle stops its thread and leaves the file reading through the cache")
    func letGoInTheMiddle() throws {
        try withTemporaryDirectory { dir in
            let path = "\(dir)/photo"
            let bytes = pattern(10 * 8192 + 17, seed: 2)
            let file = try written(bytes, to: path)
            do {
                let reader = try #require(DirectFileReader(file, blockSize: 8192, blocksAhead: 3))
                var buffer = [UInt8](repeating: 0, count: 10_000)
                #expect(try reader.readFully(into: &buffer, count: 10_000) == 10_000)
                #expect(buffer == Array(bytes[0..<10_000]))
            }
            #expect(readsBuffered(file))
            // The same descriptor then reads again from its start, directly.
            let again = try #require(DirectFileReader(file, blockSize: 8192, blocksAhead: 3))
            #expect(try readAll(again) == bytes)
        }
    }

    @Test("a read that fails is thrown, naming the file, once the blocks before it are taken, and again after")
    func failureAfterTwoBlocks() throws {
        try withTemporaryDirectory { dir in
            let path = "\(dir)/photo"
            let bytes = pattern(5 * 8192 + 9, seed: 6)
            let file = try written(bytes, to: path)
            let reader = try #require(DirectFileReader(file, blockSize: 8192, blocksAhead: 2) { fd, to, count, offset in
                if offset >= 2 * 8192 { errno = EIO; return -1 }
                return pread(fd, to, count, offset)
            })
            var buffer = [UInt8](repeating: 0, count: 2 * 8192)
            #expect(try reader.readFully(into: &buffer, count: buffer.count) == buffer.count)
            #expect(buffer == Array(bytes[0..<2 * 8192]))
            for _ in 0..<2 {
                let error = #expect(throws: SystemError.self) { _ = try reader.read(into: &buffer, offset: 0, count: 1) }
                #expect(error?.errno == EIO && error?.path == path)
            }
        }
    }

    @Test("a direct read the file system refuses (EINVAL) in the middle of a file: the rest is read through the page cache, whole")
    func refusedInTheMiddle() throws {
        try withTemporaryDirectory { dir in
            let path = "\(dir)/photo"
            let bytes = pattern(6 * 8192 + 4097, seed: 8)
            let file = try written(bytes, to: path)
            let refusals = Refusals()
            let reader = try #require(DirectFileReader(file, blockSize: 8192, blocksAhead: 3) { fd, to, count, offset in
                // The first read of the third block is refused, as a file system would; the
                // reader's retry, through the page cache, is not.
                if offset >= 2 * 8192, refusals.count == 0 { refusals.count += 1; errno = EINVAL; return -1 }
                return pread(fd, to, count, offset)
            })
            #expect(try readAll(reader) == bytes)
            #expect(refusals.count == 1)
            #expect(reader.directReads == 2)
            #expect(readsBuffered(file))
        }
    }

    @Test("a read that fails is thrown, naming the file, on the first block")
    func failedRead() throws {
        try withTemporaryDirectory { dir in
            let path = "\(dir)/written-only"
            try Data(pattern(50_000, seed: 1)).write(to: URL(fileURLWithPath: path))
            // Open for writing only: every read fails (EBADF).
            let fd = open(path, O_WRONLY | O_CLOEXEC)
            try #require(fd >= 0)
            let file = FileDescriptor(adopting: fd, path: path)
            let reader = try #require(DirectFileReader(file, blockSize: 8192, blocksAhead: 2))
            var buffer = [UInt8](repeating: 0, count: 100)
            let error = #expect(throws: SystemError.self) { _ = try reader.read(into: &buffer, offset: 0, count: 100) }
            #expect(error?.errno == EBADF)
            #expect(error?.description.contains(path) == true)
        }
    }
}
