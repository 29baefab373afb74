import N11System

/// Pull-based sources that turn one encrypted form into another. libzip pulls archive
/// entries as it writes them, so these are `ByteSource`s; the plaintext in between never
/// leaves this layer, and the single-tag input's tag (and the plaintext digest) are checked
/// before the last sealed chunk is produced, so a bad input fails the read that would
/// complete the output.
public enum Resealing {
    /// The chunked stream (under `sealKey`) of the plaintext of a single-tag message
    /// (under `openKey`). Portable archives: vault item → archive entry.
    public static func singleTagToChunked(_ source: ByteSource, algorithm: AEADAlgorithm, openKey: SecureBytes,
                                          sealKey: SecureBytes, expectedSHA256: [UInt8], expectedLength: Int64) throws -> ByteSource {
        let plaintext = try SingleTagPlaintextSource(source, algorithm: algorithm, key: openKey, sizeHint: expectedLength)
        return try ChunkedSealingSource(DigestCheckingSource(plaintext, expectedSHA256: expectedSHA256,
                                                             expectedLength: expectedLength), key: sealKey)
    }

    /// A single-tag message (under `openKey`) sealed anew as a single-tag message under
    /// `sealKey` into `sink`: a vault key rotation, or a vault item from a secure archive made
    /// before one. The input's tag and plaintext digest are checked before the new tag is
    /// written, so a bad input throws and the caller throws its output away. Returns the new tag.
    public static func singleTagToSingleTag(_ source: ByteSource, algorithm: AEADAlgorithm, openKey: SecureBytes,
                                            sealKey: SecureBytes, expectedSHA256: [UInt8], expectedLength: Int64,
                                            to sink: ByteSink) throws -> [UInt8] {
        let plaintext = try SingleTagPlaintextSource(source, algorithm: algorithm, key: openKey, sizeHint: expectedLength)
        let checked = try DigestCheckingSource(plaintext, expectedSHA256: expectedSHA256, expectedLength: expectedLength)
        return try SingleTagStream.seal(algorithm, key: sealKey, from: checked, to: sink, sizeHint: expectedLength).tag
    }

    /// The chunked stream (under `sealKey`) of a single-tag message kept as it is, checking on
    /// the way that its tag verifies under `innerKey` and its plaintext has the expected
    /// digest. Secure archives: vault file → archive entry (double encryption).
    public static func wrapSingleTag(_ source: ByteSource, algorithm: AEADAlgorithm, innerKey: SecureBytes,
                                     sealKey: SecureBytes, expectedSHA256: [UInt8], expectedLength: Int64) throws -> ByteSource {
        let checked = try SingleTagCheckingSource(source, algorithm: algorithm, key: innerKey,
                                                  expectedSHA256: expectedSHA256, expectedLength: expectedLength)
        return try ChunkedSealingSource(checked, key: sealKey)
    }
}

extension Resealing {
    /// The plaintext of a single-tag message whose tag, length and digest are checked before
    /// its end is reported. It is released before those checks, so it is only ever sealed
    /// (`chunked`): a failure throws from the read that would finish the sealed output.
    public static func checkedPlaintext(ofSingleTag source: ByteSource, algorithm: AEADAlgorithm, key: SecureBytes,
                                        expectedSHA256: [UInt8], expectedLength: Int64) throws -> ByteSource {
        let plaintext = try SingleTagPlaintextSource(source, algorithm: algorithm, key: key, sizeHint: expectedLength)
        return try DigestCheckingSource(plaintext, expectedSHA256: expectedSHA256, expectedLength: expectedLength)
    }

    /// A single-tag message passed through as it is, its tag and plaintext digest checked on
    /// the way (a secure archive keeps vault files unchanged).
    public static func checkedSingleTag(_ source: ByteSource, algorithm: AEADAlgorithm, key: SecureBytes,
                                        expectedSHA256: [UInt8], expectedLength: Int64) throws -> ByteSource {
        try SingleTagCheckingSource(source, algorithm: algorithm, key: key, expectedSHA256: expectedSHA256,
                                    expectedLength: expectedLength)
    }

    /// `payload` sealed as one chunked stream under `key`, pulled on demand (a version 3 pack:
    /// the checked payloads of its items back to back).
    public static func chunked(_ payload: ByteSource, key: SecureBytes) throws -> ByteSource {
        try ChunkedSealingSource(payload, key: key)
    }
}

/// A chunked stream's verified payload as a source: each chunk is released only after its
/// tag verified, and the end is reported only after the last-flagged chunk verified.
public final class ChunkedOpeningSource: ByteSource {
    private let opener: ChunkedStreamOpener
    private var current: ArraySlice<UInt8> = []

    /// `firstChunk`: `sealed` starts at that chunk of the stream (a version 3 item inside a
    /// pack); the stream must still run to its end from there.
    public init(_ sealed: ByteSource, key: SecureBytes, firstChunk: UInt64 = 0) throws {
        opener = try ChunkedStreamOpener(key: key, source: sealed, firstChunk: firstChunk)
    }

    public func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        while current.isEmpty {
            guard let next = try opener.nextChunk() else { return 0 }
            current = next
        }
        let n = min(count, current.count)
        buffer.withUnsafeMutableBufferPointer { dst in
            current.withUnsafeBufferPointer { src in (dst.baseAddress! + offset).update(from: src.baseAddress!, count: n) }
        }
        current = current.dropFirst(n)
        return n
    }
}

/// Seals a payload source into a chunked stream, pulled on demand.
final class ChunkedSealingSource: ByteSource {
    private let payload: ByteSource
    private let sealer: ChunkedStreamSealer
    /// Where the sealer puts sealed chunks. A separate object: were this source the
    /// sealer's sink, the two would keep each other alive (and their buffers) forever.
    private let output = MemorySink()
    private var outputStart = 0
    private var input = [UInt8].scratch(count: ChunkedStream.chunkSize)
    /// How much of `input` ever held plaintext: only that is wiped.
    private var inputUsed = 0
    private var finished = false

    init(_ payload: ByteSource, key: SecureBytes) throws {
        self.payload = payload
        sealer = try ChunkedStreamSealer(key: key, sink: output)
    }

    deinit { input.wipe(prefix: inputUsed) }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        while outputStart == output.bytes.count {
            if finished { return 0 }
            output.bytes.removeAll(keepingCapacity: true)
            outputStart = 0
            let n = try payload.read(into: &input, offset: 0, count: input.count)
            inputUsed = max(inputUsed, n)
            if n == 0 {
                try sealer.finish()
                finished = true
            } else {
                try sealer.write(input[0..<n])
            }
        }
        let n = min(count, output.bytes.count - outputStart)
        buffer.withUnsafeMutableBufferPointer { dst in
            output.bytes.withUnsafeBufferPointer { src in (dst.baseAddress! + offset).update(from: src.baseAddress! + outputStart, count: n) }
        }
        outputStart += n
        return n
    }
}

/// The plaintext of a single-tag message, pulled. Internal: it hands out plaintext before
/// the tag is checked, so it is only ever wrapped by a sealing source (whose output is
/// ciphertext that is thrown away if the final read throws).
final class SingleTagPlaintextSource: ByteSource {
    private let source: ByteSource
    private let context: AEADContext
    private var input: [UInt8]
    private var held = 0
    private var ended = false

    init(_ source: ByteSource, algorithm: AEADAlgorithm, key: SecureBytes, sizeHint: Int64?) throws {
        self.source = source
        input = StreamBuffers.take(count: SingleTagStream.bufferSize(for: sizeHint) + AEADAlgorithm.tagLength)
        context = try AEADContext(algorithm, key: key, encrypting: false)
        var nonce = [UInt8](repeating: 0, count: AEADAlgorithm.standardNonceLength)
        guard try source.readFully(into: &nonce, count: nonce.count) == nonce.count else { throw CryptoError.truncated }
        try context.start(nonce: nonce)
    }

    /// `input` only ever holds ciphertext: the plaintext goes straight to the caller's buffer.
    deinit { StreamBuffers.give(&input, used: 0) }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        let tagLength = AEADAlgorithm.tagLength
        while !ended {
            let room = min(input.count - held, count)
            let n = try source.read(into: &input, offset: held, count: room)
            held += n
            if n == 0 {
                ended = true
                guard held == tagLength else { throw CryptoError.truncated }
                guard context.finishOpening(tag: Array(input[0..<tagLength])) else { throw CryptoError.authenticationFailed }
                return 0
            }
            let ready = held - tagLength
            if ready > 0 {
                // ready <= count: at most `count` bytes were read beyond the held-back tag.
                try context.update(input, count: ready, into: &buffer, outputOffset: offset)
                input.withUnsafeMutableBufferPointer { b in b.baseAddress!.update(from: b.baseAddress! + ready, count: tagLength) }
                held = tagLength
                return ready
            }
        }
        return 0
    }
}

/// Passes a single-tag message through unchanged while decrypting it on the side to check
/// its tag and plaintext digest; the end is reported only if both hold.
final class SingleTagCheckingSource: ByteSource {
    private let plaintext: SingleTagPlaintextSource
    private let tee: TeeSource
    private let digest: SHA256Digest
    private let expectedDigest: [UInt8]
    private let expectedLength: Int64
    private var length: Int64 = 0
    private var verifiedEnd = false
    private var scratch: [UInt8]

    init(_ source: ByteSource, algorithm: AEADAlgorithm, key: SecureBytes, expectedSHA256: [UInt8], expectedLength: Int64) throws {
        // The tee holds the nonce and then at most one read of the decryptor's input buffer.
        let bufferSize = SingleTagStream.bufferSize(for: expectedLength)
        tee = TeeSource(source, capacity: bufferSize + SingleTagStream.overhead)
        digest = try SHA256Digest()
        plaintext = try SingleTagPlaintextSource(tee, algorithm: algorithm, key: key, sizeHint: expectedLength)
        scratch = StreamBuffers.take(count: bufferSize)
        expectedDigest = expectedSHA256
        self.expectedLength = expectedLength
    }

    deinit { StreamBuffers.give(&scratch, used: scratch.count) }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        // Drive the decryptor until the tee has captured some ciphertext to hand on.
        while tee.isEmpty && !verifiedEnd {
            let n = try plaintext.read(into: &scratch, offset: 0, count: scratch.count)
            if n == 0 {
                guard length == expectedLength, try digest.finish() == expectedDigest else { throw CryptoError.contentMismatch }
                verifiedEnd = true
                break
            }
            digest.update(scratch[0..<n])
            length += Int64(n)
        }
        return tee.drain(into: &buffer, offset: offset, count: count)
    }
}

/// Records what is read through it, so the same bytes can be both checked and passed on.
/// The bytes captured and not yet drained are `storage[start..<end]`, in a buffer of
/// `capacity` bytes (a kept `StreamBuffers` one) that grows only if a read outruns it.
final class TeeSource: ByteSource {
    private let source: ByteSource
    private let capacity: Int
    private var storage: [UInt8]
    private var start = 0
    private var end = 0

    init(_ source: ByteSource, capacity: Int) {
        self.source = source
        self.capacity = capacity
        storage = StreamBuffers.take(count: capacity)
    }

    /// Ciphertext only: nothing to wipe. A buffer that grew is not of a size worth keeping.
    deinit { if storage.count == capacity { StreamBuffers.give(&storage, used: 0) } }

    var isEmpty: Bool { start == end }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        let n = try source.read(into: &buffer, offset: offset, count: count)
        // Nothing read: no pointer is taken (an empty array may have none).
        guard n > 0 else { return 0 }
        if start == end { (start, end) = (0, 0) }
        if end + n > storage.count { storage.append(contentsOf: repeatElement(0, count: end + n - storage.count)) }
        storage.withUnsafeMutableBufferPointer { dst in
            buffer.withUnsafeBufferPointer { src in (dst.baseAddress! + end).update(from: src.baseAddress! + offset, count: n) }
        }
        end += n
        return n
    }

    func drain(into buffer: inout [UInt8], offset: Int, count: Int) -> Int {
        let n = min(count, end - start)
        guard n > 0 else { return 0 }
        buffer.withUnsafeMutableBufferPointer { dst in
            storage.withUnsafeBufferPointer { src in (dst.baseAddress! + offset).update(from: src.baseAddress! + start, count: n) }
        }
        start += n
        return n
    }
}
