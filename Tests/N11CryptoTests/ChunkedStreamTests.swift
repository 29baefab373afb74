import Foundation
import Testing
import N11Crypto

private let chunkSize = ChunkedStream.chunkSize              // 64 KiB of plaintext
private let sealedChunkSize = ChunkedStream.sealedChunkSize  // + 16-byte tag

/// How the sealer is fed: `write(_:)` in odd-sized slices, or `write(from:)` a source that
/// returns short reads.
enum Feed: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case oddSlices, source
    var testDescription: String { rawValue }
}

/// Slice/read sizes that straddle chunk boundaries in different places.
private let oddSizes = [1, 4093, 65_537, 17, 100_000, 3]

private func seal(_ plaintext: [UInt8], key: SecureBytes, feed: Feed = .oddSlices) throws -> [UInt8] {
    let sink = MemorySink()
    let sealer = try ChunkedStreamSealer(key: key, sink: sink)
    switch feed {
    case .oddSlices:
        var offset = 0, i = 0
        while offset < plaintext.count {
            let n = min(oddSizes[i % oddSizes.count], plaintext.count - offset)
            try sealer.write(plaintext[offset..<(offset + n)])
            offset += n
            i += 1
        }
        try sealer.write([][...])   // an empty write changes nothing
    case .source:
        try sealer.write(from: MemorySource(plaintext, readSizes: oddSizes))
    }
    try sealer.finish()
    #expect(sealer.plaintextLength == Int64(plaintext.count))
    #expect(sealer.sealedLength == Int64(sink.bytes.count))
    return sink.bytes
}

/// What an opener hands out before it stops: the verified chunks, then the error (if any).
private struct Opened {
    var chunks: [[UInt8]] = []
    var error: (any Error)?
    var plaintext: [UInt8] { Array(chunks.joined()) }
}

private func openAll(_ sealed: [UInt8], key: SecureBytes, readSizes: [Int] = oddSizes) -> Opened {
    var result = Opened()
    do {
        let opener = try ChunkedStreamOpener(key: key, source: MemorySource(sealed, readSizes: readSizes))
        while let chunk = try opener.nextChunk() { result.chunks.append(Array(chunk)) }
        #expect(opener.plaintextLength == Int64(result.plaintext.count))
    } catch {
        result.error = error
    }
    return result
}

private func chunks(of plaintext: [UInt8]) -> [[UInt8]] {
    stride(from: 0, to: plaintext.count, by: chunkSize).map {
        Array(plaintext[$0..<min($0 + chunkSize, plaintext.count)])
    }
}

/// The sealed bytes of chunk `i` (the last one may be short).
private func sealedChunk(_ sealed: [UInt8], _ i: Int) -> [UInt8] {
    Array(sealed[(i * sealedChunkSize)..<min((i + 1) * sealedChunkSize, sealed.count)])
}

@Suite("ChunkedStream (STREAM, AES-256-GCM, 64 KiB chunks)")
struct ChunkedStreamTests {
    static let sizes = [0, 1, chunkSize - 1, chunkSize, chunkSize + 1, 3 * chunkSize, 3 * chunkSize + 7]

    @Test("round trip", arguments: sizes, Feed.allCases)
    func roundTrip(size: Int, feed: Feed) throws {
        let key = try SecureBytes(randomCount: 32)
        let plaintext = patternBytes(size, seed: UInt64(size))
        let sealed = try seal(plaintext, key: key, feed: feed)
        #expect(Int64(sealed.count) == ChunkedStream.sealedLength(plaintextLength: Int64(size)))

        let opener = try ChunkedStreamOpener(key: key, source: MemorySource(sealed, readSizes: oddSizes))
        var received: [[UInt8]] = []
        while let chunk = try opener.nextChunk() { received.append(Array(chunk)) }
        #expect(received == (size == 0 ? [[]] : chunks(of: plaintext)))
        #expect(opener.plaintextLength == Int64(size))
        #expect(try opener.nextChunk() == nil)   // the end stays the end

        // forEachChunk sees the same, reading in one go.
        let again = try ChunkedStreamOpener(key: key, source: MemorySource(sealed))
        var joined: [UInt8] = []
        try again.forEachChunk { joined += $0 }
        #expect(joined == plaintext)
    }

    @Test("another chunk size (a spool's) round-trips at and around its multiples, its last chunk found by the peek; the other size fails",
          arguments: [0, 1, 1_023, 1_024, 1_025, 3 * 1_024, 3 * 1_024 + 5])
    func otherChunkSize(size: Int) throws {
        let key = try SecureBytes(randomCount: 32)
        let plaintext = patternBytes(size, seed: UInt64(size) + 11)
        let sink = MemorySink()
        let sealer = try ChunkedStreamSealer(key: key, sink: sink, chunkSize: 1_024)
        for piece in stride(from: 0, to: size, by: 700) { try sealer.write(plaintext[piece..<min(piece + 700, size)]) }
        try sealer.finish()
        let chunks = max(1, (size + 1_023) / 1_024)
        #expect(sink.bytes.count == size + 16 * chunks)

        let opener = try ChunkedStreamOpener(key: key, source: MemorySource(sink.bytes, readSizes: oddSizes), chunkSize: 1_024)
        var received: [[UInt8]] = []
        while let chunk = try opener.nextChunk() { received.append(Array(chunk)) }
        #expect(received.count == chunks && received.dropLast().allSatisfy { $0.count == 1_024 })
        #expect(received.joined().elementsEqual(plaintext))

        // Read at the format's size, a stream of several chunks does not line up: nothing opens
        // (one chunk, shorter than either size, is the same stream at both).
        if size > 1_024 {
            #expect(throws: CryptoError.self) { try ChunkedStreamOpener(key: key, source: MemorySource(sink.bytes)).forEachChunk { _ in } }
        }
    }

    @Test("sealedLength adds one tag per chunk, and one for an empty stream")
    func sealedLengthFormula() {
        let c = Int64(chunkSize)
        #expect(ChunkedStream.sealedLength(plaintextLength: 0) == 16)
        #expect(ChunkedStream.sealedLength(plaintextLength: 1) == 17)
        #expect(ChunkedStream.sealedLength(plaintextLength: c) == c + 16)
        #expect(ChunkedStream.sealedLength(plaintextLength: c + 1) == c + 1 + 32)
        #expect(ChunkedStream.sealedLength(plaintextLength: 3 * c + 7) == 3 * c + 7 + 64)
        #expect(ChunkedStream.sealedLength(plaintextLength: 1 << 40) == (1 << 40) + 16 * ((1 << 40) / c))
    }

    @Test("the sealer emits each full chunk as soon as more data follows it (memory stays at one chunk)")
    func streamsAsItGoes() throws {
        let sink = MemorySink()
        let sealer = try ChunkedStreamSealer(key: try key(), sink: sink)
        try sealer.write(patternBytes(chunkSize)[...])
        #expect(sink.bytes.isEmpty)   // might still be the last chunk
        try sealer.write([1][...])
        #expect(sink.bytes.count == sealedChunkSize)
        try sealer.write(patternBytes(2 * chunkSize)[...])   // 3 chunks and 1 byte so far
        #expect(sink.bytes.count == 3 * sealedChunkSize)
        try sealer.finish()
        #expect(sink.bytes.count == 3 * sealedChunkSize + 1 + 16)
    }

    /// A full pending chunk may be the last one; write(from:) must not seal it as non-last
    /// just because it is full, or a source ending on a boundary leaves an empty extra chunk.
    @Test("write(from:) a source that ends on a chunk boundary", arguments: [1, 2])
    func writeFromEndingOnBoundary(chunkCount: Int) throws {
        let k = try key()
        let plaintext = patternBytes(chunkCount * chunkSize)
        let sink = MemorySink()
        let sealer = try ChunkedStreamSealer(key: k, sink: sink)
        try sealer.write(from: MemorySource(plaintext))
        try sealer.finish()
        #expect(sink.bytes.count == chunkCount * sealedChunkSize)
        let opened = openAll(sink.bytes, key: k)
        #expect(opened.error == nil, "\(String(describing: opened.error))")
        #expect(opened.plaintext == plaintext)
    }

    /// Each chunk is plain AES-256-GCM under nonce = counter (11 bytes, big-endian) ‖ last flag,
    /// so the format can be opened by any implementation, and the flag/counter are bound.
    @Test("wire format: chunk i is AES-256-GCM under nonce counter(11, BE) ‖ lastFlag")
    func wireFormat() throws {
        let k = try key()
        let plaintext = patternBytes(2 * chunkSize + 5)
        let sealed = try seal(plaintext, key: k)
        let expected = chunks(of: plaintext)
        for i in 0..<3 {
            let bytes = sealedChunk(sealed, i)
            let isLast = i == 2
            var nonce = [UInt8](repeating: 0, count: 12)
            nonce[10] = UInt8(i)
            nonce[11] = isLast ? 1 : 0
            let opened = try AEAD.open(.aes256GCM, key: k, nonce: nonce, ciphertext: Array(bytes.dropLast(16)),
                                       tag: Array(bytes.suffix(16)))
            #expect(opened == expected[i], "chunk \(i)")
            nonce[11] ^= 1
            #expect(throws: CryptoError.authenticationFailed, "chunk \(i) with the other flag") {
                _ = try AEAD.open(.aes256GCM, key: k, nonce: nonce, ciphertext: Array(bytes.dropLast(16)),
                                  tag: Array(bytes.suffix(16)))
            }
        }
    }
}

@Suite("ChunkedStream tampering")
struct ChunkedStreamTamperTests {
    let key: SecureBytes
    /// 3 full chunks and a 7-byte last chunk.
    let plaintext: [UInt8]
    let sealed: [UInt8]
    /// 2 full chunks, the second one last.
    let evenPlaintext: [UInt8]
    let evenSealed: [UInt8]

    init() throws {
        key = try SecureBytes(randomCount: 32)
        plaintext = patternBytes(3 * chunkSize + 7)
        sealed = try seal(plaintext, key: key)
        evenPlaintext = patternBytes(2 * chunkSize, seed: 2)
        evenSealed = try seal(evenPlaintext, key: key)
    }

    /// Opening `stream` must hand out exactly the first `verified` original chunks, then fail with `error`.
    private func expectFailure(_ stream: [UInt8], original: [UInt8]? = nil, key: SecureBytes? = nil,
                               _ error: CryptoError, afterChunks verified: Int,
                               _ comment: Comment, sourceLocation: SourceLocation = #_sourceLocation) {
        let result = openAll(stream, key: key ?? self.key)
        #expect(result.error as? CryptoError == error,
                "\(comment): got \(String(describing: result.error))", sourceLocation: sourceLocation)
        #expect(result.chunks == Array(chunks(of: original ?? plaintext).prefix(verified)),
                "\(comment): \(result.chunks.count) chunks handed out", sourceLocation: sourceLocation)
    }

    private func flipping(_ stream: [UInt8], at index: Int) -> [UInt8] {
        var copy = stream
        copy[index] ^= 0x01
        return copy
    }

    @Test("a flipped bit in any chunk fails authentication at that chunk")
    func bitFlips() {
        let last = 3 * sealedChunkSize
        expectFailure(flipping(sealed, at: 100), .authenticationFailed, afterChunks: 0, "first chunk body")
        expectFailure(flipping(sealed, at: sealedChunkSize - 1), .authenticationFailed, afterChunks: 0, "first chunk tag")
        expectFailure(flipping(sealed, at: sealedChunkSize + 5000), .authenticationFailed, afterChunks: 1, "middle chunk body")
        expectFailure(flipping(sealed, at: 2 * sealedChunkSize - 16), .authenticationFailed, afterChunks: 1, "middle chunk tag")
        expectFailure(flipping(sealed, at: last + 3), .authenticationFailed, afterChunks: 3, "last chunk body")
        expectFailure(flipping(sealed, at: sealed.count - 1), .authenticationFailed, afterChunks: 3, "last chunk tag")
        expectFailure(flipping(evenSealed, at: sealedChunkSize + 10), original: evenPlaintext,
                      .authenticationFailed, afterChunks: 1, "full last chunk body")
    }

    @Test("truncation at a chunk boundary is reported as truncation")
    func truncationAtBoundary() {
        expectFailure(Array(sealed.prefix(3 * sealedChunkSize)), .truncated, afterChunks: 2, "last chunk dropped")
        expectFailure(Array(sealed.prefix(2 * sealedChunkSize)), .truncated, afterChunks: 1, "two chunks dropped")
        expectFailure(Array(sealed.prefix(sealedChunkSize)), .truncated, afterChunks: 0, "only the first chunk")
        expectFailure(Array(evenSealed.prefix(sealedChunkSize)), original: evenPlaintext, .truncated,
                      afterChunks: 0, "full last chunk dropped")
        expectFailure([], .truncated, afterChunks: 0, "nothing at all")
    }

    @Test("truncation inside a chunk fails")
    func truncationMidChunk() {
        expectFailure(Array(sealed.prefix(2 * sealedChunkSize + 1000)), .authenticationFailed, afterChunks: 2,
                      "cut 1000 bytes into chunk 2")
        expectFailure(Array(sealed.dropLast()), .authenticationFailed, afterChunks: 3, "last byte of the tag cut")
        expectFailure(Array(evenSealed.dropLast(100)), original: evenPlaintext, .authenticationFailed,
                      afterChunks: 1, "full last chunk cut short")
        // Less than a tag left: nothing to authenticate, so it is truncation.
        expectFailure(Array(sealed.prefix(2 * sealedChunkSize + 5)), .truncated, afterChunks: 2,
                      "5 bytes of chunk 2 left")
        expectFailure(Array(sealed.prefix(15)), .truncated, afterChunks: 0, "15 bytes left")
    }

    @Test("dropping, duplicating or reordering chunks fails")
    func reordering() {
        let c = (0..<4).map { sealedChunk(sealed, $0) }
        expectFailure(c[0] + c[2] + c[3], .authenticationFailed, afterChunks: 1, "middle chunk dropped")
        expectFailure(c[1] + c[2] + c[3], .authenticationFailed, afterChunks: 0, "first chunk dropped")
        expectFailure(c[1] + c[0] + c[2] + c[3], .authenticationFailed, afterChunks: 0, "chunks 0 and 1 swapped")
        expectFailure(c[0] + c[2] + c[1] + c[3], .authenticationFailed, afterChunks: 1, "chunks 1 and 2 swapped")
        expectFailure(c[0] + c[1] + c[1] + c[2] + c[3], .authenticationFailed, afterChunks: 2, "chunk 1 duplicated")
        // A last chunk moved forward ends the stream early, with chunks still following.
        let e = (0..<2).map { sealedChunk(evenSealed, $0) }
        expectFailure(e[1] + e[0], original: evenPlaintext, .authenticationFailed, afterChunks: 0, "even stream swapped")
    }

    @Test("data after the last chunk fails")
    func trailingData() throws {
        // The last chunk is short: extra bytes make it unreadable as any chunk.
        expectFailure(sealed + [0], .authenticationFailed, afterChunks: 3, "one byte appended")
        expectFailure(sealed + sealedChunk(sealed, 1), .authenticationFailed, afterChunks: 3, "a whole chunk appended")
        // The last chunk is full: it verifies as last with data after it, which the opener
        // documents as trailing data.
        expectFailure(evenSealed + [0], original: evenPlaintext, .trailingData, afterChunks: 1, "one byte appended to even stream")
        expectFailure(evenSealed + sealedChunk(evenSealed, 0), original: evenPlaintext, .trailingData, afterChunks: 1,
                      "a whole chunk appended to even stream")
        let emptyStream = try seal([], key: key)
        #expect(emptyStream.count == 16)
        expectFailure(evenSealed + emptyStream, original: evenPlaintext, .trailingData, afterChunks: 1,
                      "an empty last chunk appended to even stream")
        expectFailure(evenSealed + evenSealed, original: evenPlaintext, .trailingData, afterChunks: 1,
                      "the stream appended to itself")
    }

    @Test("a different key fails at the first chunk")
    func wrongKey() throws {
        let other = try SecureBytes(randomCount: 32)
        expectFailure(sealed, key: other, .authenticationFailed, afterChunks: 0, "random other key")
        let emptyStream = try seal([], key: key)
        expectFailure(emptyStream, key: other, .authenticationFailed, afterChunks: 0, "empty stream, other key")
    }

    /// The release rule: nextChunk returns a chunk only after reading its whole tag and
    /// verifying it, so a bad last chunk yields the earlier (good) chunks and then an error,
    /// never any of the bad chunk's plaintext.
    @Test("a tampered last chunk: earlier chunks are released, none of the bad one", arguments: [3, 4])
    func releaseOnlyVerified(chunkCount: Int) throws {
        // 3 full chunks (full last chunk), or 3 full + a 7-byte last chunk.
        let text = chunkCount == 4 ? plaintext : patternBytes(3 * chunkSize, seed: 3)
        let stream = chunkCount == 4 ? sealed : try seal(text, key: key)
        let expected = chunks(of: text)
        let tampered = flipping(stream, at: (chunkCount - 1) * sealedChunkSize + 2)

        let source = MemorySource(tampered)
        let opener = try ChunkedStreamOpener(key: key, source: source)
        for i in 0..<(chunkCount - 1) {
            let chunk = try #require(try opener.nextChunk(), "chunk \(i)")
            #expect(Array(chunk) == expected[i], "chunk \(i)")
            // Its tag was read (and checked) before it was handed out.
            #expect(tampered.count - source.remaining >= (i + 1) * sealedChunkSize, "chunk \(i)")
        }
        #expect(throws: CryptoError.authenticationFailed) { _ = try opener.nextChunk() }
        #expect(opener.plaintextLength == Int64((chunkCount - 1) * chunkSize))
    }
}
