import Testing
@testable import N11Crypto
import N11System

/// `StreamBuffers` keeps large streaming buffers for the next item; the sources that use it
/// must still pass every byte through whatever the read sizes.
struct StreamBuffersTests {
    private static func address(_ buffer: [UInt8]) -> UInt? {
        buffer.withUnsafeBufferPointer { $0.baseAddress.map { UInt(bitPattern: $0) } }
    }

    @Test("a large buffer given back is taken again, its used prefix wiped")
    func reused() {
        let buffers = StreamBuffers()
        let count = StreamBuffers.smallest + 100
        var first = buffers.take(count: count)
        for i in 0..<first.count { first[i] = 0xA5 }
        let storage = Self.address(first)
        buffers.give(&first, used: 1000)
        #expect(first.isEmpty)
        #expect(buffers.waiting == 1)
        let second = buffers.take(count: count)
        #expect(Self.address(second) == storage)
        #expect(second.count == count)
        #expect(second[0..<1000].allSatisfy { $0 == 0 })
        #expect(second[1000] == 0xA5)
        #expect(buffers.waiting == 0)
    }

    @Test("only buffers of the size asked for are taken; small ones and those beyond `kept` are freed")
    func bounded() {
        let buffers = StreamBuffers(kept: 2)
        // A buffer of a smaller item's own size (300 KiB): no later item would ask for it.
        for count in [StreamBuffers.smallest - 1, 300 << 10] {
            var small = buffers.take(count: count)
            buffers.give(&small, used: 0)
            #expect(buffers.waiting == 0)
        }
        var three = (0..<3).map { _ in buffers.take(count: StreamBuffers.smallest) }
        for i in three.indices { buffers.give(&three[i], used: 0) }
        #expect(buffers.waiting == 2)
        #expect(buffers.take(count: StreamBuffers.smallest + 1).count == StreamBuffers.smallest + 1)
        #expect(buffers.waiting == 2)
    }

    /// Reads `source` to its end in pieces of the given sizes, in turn.
    private static func drain(_ source: ByteSource, pieces: [Int]) throws -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: pieces.max()! + 3)
        var turn = 0
        while true {
            let n = try source.read(into: &buffer, offset: 3, count: pieces[turn % pieces.count])
            if n == 0 { return out }
            out += buffer[3..<(3 + n)]
            turn += 1
        }
    }

    @Test("a single-tag message checked on its way passes through unchanged, at any size and read size",
          arguments: [0, 1, 4095, 1 << 20, (1 << 20) + 1, 3 * (1 << 20) + 7])
    func checkedPassThrough(size: Int) throws {
        let key = try SecureBytes(randomCount: 32)
        let plaintext = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        let sink = MemorySink()
        _ = try SingleTagStream.seal(.aes256GCM, key: key, from: MemorySource(plaintext), to: sink)
        let digest = try SHA256Digest.hash(plaintext)
        // Twice: the second message's buffers are the first's, kept.
        for pieces in [[1000, 70_000], [1 << 21]] {
            let checked = try Resealing.checkedSingleTag(MemorySource(sink.bytes), algorithm: .aes256GCM, key: key,
                                                         expectedSHA256: digest, expectedLength: Int64(size))
            #expect(try Self.drain(checked, pieces: pieces) == sink.bytes)
        }
    }

    @Test("a tee whose reads outrun its capacity grows, and hands on every byte in order")
    func teeGrows() throws {
        let bytes = (0..<300).map { UInt8($0 % 251) }
        let tee = TeeSource(MemorySource(bytes), capacity: 10)
        var buffer = [UInt8](repeating: 0, count: 200)
        #expect(try tee.read(into: &buffer, offset: 5, count: 100) == 100)
        #expect(try tee.read(into: &buffer, offset: 0, count: 150) == 150)
        var out = [UInt8](repeating: 0, count: 300)
        #expect(tee.drain(into: &out, offset: 0, count: 120) == 120)
        #expect(tee.drain(into: &out, offset: 120, count: 300) == 130)
        #expect(tee.isEmpty)
        #expect(try tee.read(into: &buffer, offset: 0, count: 100) == 50)
        #expect(tee.drain(into: &out, offset: 250, count: 50) == 50)
        #expect(out == bytes)
        // Empty buffers at the end: nothing to copy, and no pointer to take.
        var empty: [UInt8] = []
        #expect(try tee.read(into: &empty, offset: 0, count: 0) == 0)
        #expect(tee.drain(into: &empty, offset: 0, count: 0) == 0)
    }

    @Test("a flipped byte or a wrong digest fails the read that would finish the message")
    func checkedRefuses() throws {
        let key = try SecureBytes(randomCount: 32)
        let plaintext = [UInt8](repeating: 7, count: (1 << 20) + 5)
        let sink = MemorySink()
        _ = try SingleTagStream.seal(.aes256GCM, key: key, from: MemorySource(plaintext), to: sink)
        var flipped = sink.bytes
        flipped[flipped.count / 2] ^= 1
        let digest = try SHA256Digest.hash(plaintext)
        let bad = try Resealing.checkedSingleTag(MemorySource(flipped), algorithm: .aes256GCM, key: key,
                                                 expectedSHA256: digest, expectedLength: Int64(plaintext.count))
        #expect(throws: CryptoError.self) { try Self.drain(bad, pieces: [65_536]) }
        let wrongDigest = try Resealing.checkedSingleTag(MemorySource(sink.bytes), algorithm: .aes256GCM, key: key,
                                                         expectedSHA256: [UInt8](repeating: 0, count: 32),
                                                         expectedLength: Int64(plaintext.count))
        #expect(throws: CryptoError.contentMismatch) { try Self.drain(wrongDigest, pieces: [65_536]) }
    }
}
