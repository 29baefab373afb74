import Foundation
import Glibc
import Testing
@testable import N11Archiver
@testable import N11Container
import N11Crypto
import N11System
import N11TestSupport

/// `create` hashes the archive while libzip writes it (`TrailingSHA256`, told what is final by
/// `ZipOutputFile`). A digest taken too early would put a wrong SHA-256 into the written-archive
/// record, and `verify --as-written` and `prune` would then call a good archive damaged. These
/// tests hold the trailing digest to the SHA-256 of the finished file.
@Suite("Trailing SHA-256 of an archive being written")
struct TrailingDigestTests {
    /// What the writer told: every end in order, and whether it voided them. Given the file,
    /// it also hashes what it is told is final at the moment it is told, so that a prefix
    /// declared final too early (and changed afterwards) shows whatever the timing of the
    /// digest's own thread.
    final class Recorder: FinalPrefixObserver {
        var ends: [Int64] = []
        var prefixDigests: [Int64: [UInt8]] = [:]
        var voided = false
        var path: String?
        func prefixIsFinal(upTo end: Int64) {
            ends.append(end)
            if let path, let bytes = try? Array(Data(contentsOf: URL(fileURLWithPath: path)).prefix(Int(end))),
               let digest = try? SHA256Digest.hash(bytes) {
                prefixDigests[end] = digest
            }
        }
        func finalPrefixWasRewritten() { voided = true }

        /// Every prefix hashed when it was told final is the same prefix of the finished file.
        func prefixesHeld(in finished: String) throws -> Bool {
            let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: finished)))
            return try prefixDigests.allSatisfy { end, digest in try SHA256Digest.hash(Array(bytes.prefix(Int(end)))) == digest }
        }
    }

    static func fileSHA256(_ path: String) throws -> String {
        try SHA256Digest.hash(try Array(Data(contentsOf: URL(fileURLWithPath: path)))).hex
    }

    /// A ZIP of entries of `sizes` through an `AtomicFile`, as `create` writes it, with both
    /// a recorder and a trailing digest watching; returns the file's path and the digest.
    static func write(_ sizes: [Int], in dir: String, seed: UInt8, recorder: Recorder? = nil) throws -> (String, String?) {
        let path = dir + "/t-\(seed).zip"
        let file = try AtomicFile(path: path)
        recorder?.path = "/proc/self/fd/\(file.descriptor.rawValue)"
        let writer = try ZipWriter(writingTo: file.descriptor, named: path)
        for (i, size) in sizes.enumerated() {
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i &+ Int(seed)) }
            try writer.addEntry(name: "entry-\(i)", size: Int64(size), modified: 0) { MemorySource(bytes) }
        }
        let trailing = TrailingSHA256(file.descriptor)
        defer { trailing.cancel() }
        if let recorder {
            writer.observeFinalPrefix(Fanout([recorder, trailing]))
        } else {
            writer.observeFinalPrefix(trailing)
        }
        try writer.finish()
        let digest = trailing.finish(size: try file.descriptor.status().size)
        try file.commit(replaceExisting: false)
        return (path, digest)
    }

    final class Fanout: FinalPrefixObserver {
        let observers: [FinalPrefixObserver]
        init(_ observers: [FinalPrefixObserver]) { self.observers = observers }
        func prefixIsFinal(upTo end: Int64) { for o in observers { o.prefixIsFinal(upTo: end) } }
        func finalPrefixWasRewritten() { for o in observers { o.finalPrefixWasRewritten() } }
    }

    @Test("the digest equals the finished file's SHA-256, for entries around the 1 MiB buffer and libzip's 8 KiB copies")
    func matchesTheFile() throws {
        try withTemporaryDirectory { dir in
            let sizes = [0, 1, 8191, 8193, (1 << 20) - 40, 1 << 20, (1 << 20) + 100, 3 * (1 << 20) + 7, 2, 5000, 64, 2 << 20]
            let recorder = Recorder()
            let (path, digest) = try Self.write(sizes, in: dir, seed: 0, recorder: recorder)
            #expect(digest == (try Self.fileSHA256(path)))
            #expect(recorder.prefixDigests.count == recorder.ends.count)
            #expect(try recorder.prefixesHeld(in: path), "nothing told final changed afterwards")
            // It followed the writer: told more than once, in order, up to the whole file.
            #expect(!recorder.voided)
            #expect(recorder.ends.count > sizes.count / 2)
            #expect(recorder.ends == recorder.ends.sorted() && Set(recorder.ends).count == recorder.ends.count)
            #expect(recorder.ends.last == (try FileStatus.of(path)?.size))
        }
    }

    @Test("random entry sizes: the digest always equals the file's SHA-256")
    func randomSizes() throws {
        var rng = SystemRandomNumberGenerator()
        try withTemporaryDirectory { dir in
            for seed in 1...6 as ClosedRange<UInt8> {
                let sizes = (0..<Int.random(in: 1...24, using: &rng)).map { _ in
                    Bool.random(using: &rng) ? Int.random(in: 0...20_000, using: &rng) : Int.random(in: 0...(3 << 20), using: &rng)
                }
                let recorder = Recorder()
                let (path, digest) = try Self.write(sizes, in: dir, seed: seed, recorder: recorder)
                #expect(digest == (try Self.fileSHA256(path)), "sizes \(sizes)")
                #expect(try recorder.prefixesHeld(in: path), "sizes \(sizes)")
            }
        }
    }

    @Test("a write below what was declared final voids the observer, and the digest falls back")
    func rewriteVoids() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/raw"
            let output = try ZipOutputFile(creating: path)
            let recorder = Recorder()
            output.observer = recorder
            let bytes = [UInt8](repeating: 7, count: 100)
            // libzip's pattern: header, data, back to the header, back to the end.
            #expect(output.write(bytes, count: 100))
            #expect(output.seek(offset: 0, whence: SEEK_SET))
            #expect(output.write(bytes, count: 10))
            #expect(output.seek(offset: 100, whence: SEEK_SET))
            #expect(output.write(bytes, count: 50))
            // 0..<100 is final, but the rewritten header is still in the buffer: nothing told yet.
            #expect(recorder.ends.isEmpty)
            #expect(output.flush())
            #expect(recorder.ends == [100])
            #expect(!recorder.voided)
            // Anything written below 100 now is a rewrite of what was declared final.
            #expect(output.seek(offset: 40, whence: SEEK_SET))
            #expect(output.write(bytes, count: 1))
            #expect(recorder.voided)
            #expect(output.commit())
            // Once voided, nothing more is told, not even the end at commit.
            #expect(recorder.ends == [100])
        }
        // The digest gives nothing once voided, and the caller reads the file back.
        try withTemporaryDirectory { dir in
            let path = dir + "/f"
            try Data(repeating: 1, count: 5000).write(to: URL(fileURLWithPath: path))
            let trailing = TrailingSHA256(try FileDescriptor.openForReading(path))
            trailing.prefixIsFinal(upTo: 5000)
            trailing.finalPrefixWasRewritten()
            #expect(trailing.finish(size: 5000) == nil)
        }
    }

    @Test("a file shorter than it was declared final gives no digest")
    func shorterThanDeclared() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/f"
            try Data(repeating: 9, count: 5000).write(to: URL(fileURLWithPath: path))
            let trailing = TrailingSHA256(try FileDescriptor.openForReading(path))
            trailing.prefixIsFinal(upTo: 8000)
            #expect(trailing.finish(size: 8000) == nil)
        }
    }

    @Test("a digest told less than the whole file gives nothing rather than a digest of part of it")
    func partialGivesNothing() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/f"
            let bytes = [UInt8](repeating: 3, count: 300_000)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let partial = TrailingSHA256(try FileDescriptor.openForReading(path))
            partial.prefixIsFinal(upTo: 200_000)
            #expect(partial.finish(size: 300_000) == nil)
            let whole = TrailingSHA256(try FileDescriptor.openForReading(path))
            whole.prefixIsFinal(upTo: 100_000)
            whole.prefixIsFinal(upTo: 300_000)
            #expect(whole.finish(size: 300_000) == (try SHA256Digest.hash(bytes).hex))
        }
    }
}
