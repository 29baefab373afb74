import N11System

/// STREAM-style chunked AEAD (Hoang–Reyhanitabar–Rogaway–Vizár; the construction age uses):
/// the plaintext is cut into chunks of `chunkSize` bytes, each sealed with AES-256-GCM under
/// one per-stream key and the nonce `counter (11 bytes, big-endian) ‖ lastFlag (1 byte)`.
/// Chunk order is bound by the counter, the end by the last flag, so reordering, dropping,
/// truncating or appending chunks all fail. Memory stays at one chunk whatever the size.
///
/// The key must be unique to the stream (derive it per entry); nonces restart at zero.
public enum ChunkedStream {
    /// The archive format's chunk size (FORMAT.md); a stream that never leaves the process may
    /// use another (`ChunkedStreamSealer(chunkSize:)`), and the two lengths below are then not its.
    public static let chunkSize = 64 * 1024
    public static let tagLength = AEADAlgorithm.tagLength
    public static let sealedChunkSize = chunkSize + tagLength
    static let algorithm = AEADAlgorithm.aes256GCM

    /// Errors of the source or sink pass through unchanged; crypto failures are `CryptoError`.

    /// Ciphertext length for a plaintext of `length` bytes at the format's chunk size: every
    /// chunk adds a tag, and an empty plaintext is one empty last chunk.
    public static func sealedLength(plaintextLength length: Int64) -> Int64 {
        let chunks = max(1, (length + Int64(chunkSize) - 1) / Int64(chunkSize))
        return length + chunks * Int64(tagLength)
    }

    static func nonce(counter: UInt64, isLast: Bool) -> [UInt8] {
        var nonce = [UInt8](repeating: 0, count: 12)
        for i in 0..<8 { nonce[3 + i] = UInt8(truncatingIfNeeded: counter >> (56 - 8 * UInt64(i))) }
        nonce[11] = isLast ? 1 : 0
        return nonce
    }
}

/// Seals a plaintext stream. Feed it with `write` (any slice sizes), then call `finish()`:
/// the last chunk is sealed only then, so the writer never needs to know the total length.
public final class ChunkedStreamSealer {
    private let context: AEADContext
    private let sink: ByteSink
    /// Plaintext bytes per chunk: the archive format's `ChunkedStream.chunkSize`, unless the
    /// stream never leaves this process (a `SpoolFile` uses smaller chunks so that a merge can
    /// hold many streams open at once).
    private let chunkSize: Int
    private var pending: [UInt8]
    private var pendingCount = 0
    private var sealed: [UInt8]
    private var counter: UInt64 = 0
    private var finished = false
    /// How much of `pending` ever held plaintext: only that is wiped.
    private var pendingUsed = 0
    public private(set) var plaintextLength: Int64 = 0
    public private(set) var sealedLength: Int64 = 0

    public init(key: SecureBytes, sink: ByteSink, chunkSize: Int = ChunkedStream.chunkSize) throws(CryptoError) {
        precondition(chunkSize > 0)
        context = try AEADContext(ChunkedStream.algorithm, key: key, encrypting: true)
        self.sink = sink
        self.chunkSize = chunkSize
        pending = .scratch(count: chunkSize)
        sealed = .scratch(count: chunkSize + ChunkedStream.tagLength)
    }

    deinit { pending.wipe(prefix: pendingUsed) }

    public func write(_ bytes: ArraySlice<UInt8>) throws {
        precondition(!finished)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            // A full pending chunk is sealed only when more data arrives: it may be the last.
            if pendingCount == chunkSize { try sealPending(isLast: false) }
            let take = min(chunkSize - pendingCount, bytes.endIndex - index)
            pending.withUnsafeMutableBufferPointer { dst in
                bytes.withUnsafeBufferPointer { src in
                    (dst.baseAddress! + pendingCount).update(from: src.baseAddress! + (index - bytes.startIndex), count: take)
                }
            }
            pendingCount += take
            pendingUsed = max(pendingUsed, pendingCount)
            index += take
        }
        plaintextLength += Int64(bytes.count)
    }

    /// Reads `source` to its end and seals everything it gives.
    public func write(from source: ByteSource) throws {
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        defer { buffer.wipe() }
        while true {
            let n = try source.read(into: &buffer, offset: 0, count: buffer.count)
            if n == 0 { return }
            try write(buffer[0..<n])
        }
    }

    public func finish() throws {
        precondition(!finished)
        try sealPending(isLast: true)
        finished = true
    }

    private func sealPending(isLast: Bool) throws {
        guard counter < (1 << 56) else { throw CryptoError.invalidParameter("stream too long") }
        try context.start(nonce: ChunkedStream.nonce(counter: counter, isLast: isLast))
        try context.update(pending, count: pendingCount, into: &sealed)
        let tag = try context.finishSealing()
        sealed.replaceSubrange(pendingCount..<(pendingCount + ChunkedStream.tagLength), with: tag)
        try sink.write(sealed[0..<(pendingCount + ChunkedStream.tagLength)])
        sealedLength += Int64(pendingCount + ChunkedStream.tagLength)
        counter += 1
        pendingCount = 0
    }
}

/// Opens a sealed stream chunk by chunk. `nextChunk()` hands out a chunk only after its tag
/// verified, and returns nil only after a chunk flagged last verified and nothing followed:
/// a caller cannot see unauthenticated plaintext, and cannot mistake a truncated stream
/// for a complete one.
public final class ChunkedStreamOpener {
    private let context: AEADContext
    private let source: ByteSource
    /// As the sealer's: the stream's own chunk size.
    private let chunkSize: Int
    private var sealed: [UInt8]
    private var plain: [UInt8]
    private var lookahead: UInt8? = nil
    private var counter: UInt64 = 0
    private var done = false
    /// How much of `plain` ever held plaintext: only that is wiped.
    private var plainUsed = 0
    public private(set) var plaintextLength: Int64 = 0

    public init(key: SecureBytes, source: ByteSource, firstChunk: UInt64 = 0,
                chunkSize: Int = ChunkedStream.chunkSize) throws(CryptoError) {
        precondition(chunkSize > 0)
        context = try AEADContext(ChunkedStream.algorithm, key: key, encrypting: false)
        self.source = source
        self.chunkSize = chunkSize
        counter = firstChunk
        sealed = .scratch(count: chunkSize + ChunkedStream.tagLength + 1)
        plain = .scratch(count: chunkSize)
    }

    deinit { plain.wipe(prefix: plainUsed) }

    /// The next verified plaintext chunk, or nil at the authenticated end of the stream.
    public func nextChunk() throws -> ArraySlice<UInt8>? {
        if done { return nil }
        var filled = 0
        if let byte = lookahead { sealed[0] = byte; filled = 1; lookahead = nil }
        let sealedChunkSize = chunkSize + ChunkedStream.tagLength
        filled += try source.readFully(into: &sealed, offset: filled, count: sealedChunkSize - filled)
        // A full chunk is the last one only if nothing follows it; peek one byte to know.
        var isLast = filled < sealedChunkSize
        if !isLast {
            var peek = [UInt8](repeating: 0, count: 1)
            let n = try source.readFully(into: &peek, count: 1)
            if n == 0 { isLast = true } else { lookahead = peek[0] }
        }
        guard filled >= ChunkedStream.tagLength else { throw CryptoError.truncated }
        let bodyLength = filled - ChunkedStream.tagLength
        // An empty chunk is only valid as the whole of an empty stream.
        if bodyLength == 0 && counter > 0 { throw CryptoError.trailingData }
        let plaintext = try open(bodyLength: bodyLength, isLast: isLast)
        counter += 1
        if isLast { done = true }
        plaintextLength += Int64(plaintext.count)
        return plaintext
    }

    private func open(bodyLength: Int, isLast: Bool) throws(CryptoError) -> ArraySlice<UInt8> {
        guard counter < (1 << 56) else { throw CryptoError.invalidParameter("stream too long") }
        let tag = Array(sealed[bodyLength..<(bodyLength + ChunkedStream.tagLength)])
        if try attempt(bodyLength: bodyLength, tag: tag, isLast: isLast) { return plain[0..<bodyLength] }
        // Say what went wrong when we can tell: a chunk that verifies as non-last where the
        // data ends means truncation; one that verifies as last with data after it, trailing data.
        if try attempt(bodyLength: bodyLength, tag: tag, isLast: !isLast) {
            plain.wipe(prefix: bodyLength)
            throw isLast ? .truncated : .trailingData
        }
        plain.wipe(prefix: bodyLength)
        throw CryptoError.authenticationFailed
    }

    private func attempt(bodyLength: Int, tag: [UInt8], isLast: Bool) throws(CryptoError) -> Bool {
        try context.start(nonce: ChunkedStream.nonce(counter: counter, isLast: isLast))
        plainUsed = max(plainUsed, bodyLength)
        try context.update(sealed, count: bodyLength, into: &plain)
        return context.finishOpening(tag: tag)
    }

    /// Reads and verifies the whole stream, handing each verified chunk to `body`.
    public func forEachChunk(_ body: (ArraySlice<UInt8>) throws -> Void) throws {
        while let chunk = try nextChunk() { try body(chunk) }
    }
}

extension ChunkedStream {
    /// Seals bytes already in memory (the manifest) in one call.
    public static func seal(_ bytes: [UInt8], key: SecureBytes) throws -> [UInt8] {
        let sink = MemorySink()
        let sealer = try ChunkedStreamSealer(key: key, sink: sink)
        try sealer.write(bytes[...])
        try sealer.finish()
        return sink.bytes
    }
}

/// Collects written bytes in memory.
final class MemorySink: ByteSink {
    var bytes: [UInt8] = []
    func write(_ slice: ArraySlice<UInt8>) throws { bytes.append(contentsOf: slice) }
}
