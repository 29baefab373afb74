import N11System

/// Receives plaintext whose tag has NOT been checked yet. A conformer must keep what it gets
/// out of sight (a temp file renamed only afterwards, an encryptor into a staged file, a
/// counter that discards) until the call that fed it returns without throwing; if that call
/// throws, everything staged must be thrown away. This is how a single-tag message larger
/// than memory is opened without anyone acting on unauthenticated plaintext.
public protocol UnverifiedPlaintextSink: AnyObject {
    func stage(_ bytes: ArraySlice<UInt8>) throws
}

/// A sink that throws everything away: used to verify a tag without keeping plaintext.
public final class DiscardingSink: UnverifiedPlaintextSink {
    public private(set) var count: Int64 = 0
    public init() {}
    public func stage(_ bytes: ArraySlice<UInt8>) throws { count += Int64(bytes.count) }
}

/// One AEAD message with one tag, streamed: `nonce ‖ ciphertext ‖ tag`. This is the vault
/// item layout of seed 003 (ChaCha20-Poly1305, 12-byte nonce, 16-byte tag). Memory stays at
/// one buffer whatever the size.
public enum SingleTagStream {
    public static let bufferSize = 1 << 20

    /// The buffer for a message of about `sizeHint` bytes: small items (notes) get a small
    /// buffer, since zeroing and wiping 1 MiB per 2 KiB note was a large part of the cost of
    /// handling 20,000 of them. A wrong hint only costs speed: the loops handle any length.
    public static func bufferSize(for sizeHint: Int64?) -> Int {
        guard let sizeHint else { return bufferSize }
        return Int(min(Int64(bufferSize), max(sizeHint, 4096)))
    }
    public static let overhead = AEADAlgorithm.standardNonceLength + AEADAlgorithm.tagLength

    public struct Sealed: Sendable {
        public let plaintextLength: Int64
        public let tag: [UInt8]
    }

    /// Encrypts everything `source` gives into `sink` as nonce ‖ ciphertext ‖ tag under a
    /// fresh random nonce. Output is written a buffer behind the input, so that a message
    /// that fits one buffer (a note) reaches the sink in one write, nonce and tag included.
    public static func seal(_ algorithm: AEADAlgorithm, key: SecureBytes, aad: [UInt8] = [],
                            from source: ByteSource, to sink: ByteSink, sizeHint: Int64? = nil) throws -> Sealed {
        let context = try AEADContext(algorithm, key: key, encrypting: true)
        let nonce = SecureRandom.bytes(AEADAlgorithm.standardNonceLength)
        try context.start(nonce: nonce, aad: aad)
        let bufferSize = bufferSize(for: sizeHint)
        var input = StreamBuffers.take(count: bufferSize)
        // output[0..<pending] is ciphertext (and at first the nonce) not yet written.
        var output = StreamBuffers.take(count: nonce.count + bufferSize + AEADAlgorithm.tagLength)
        defer {
            StreamBuffers.give(&input, used: input.count)
            StreamBuffers.give(&output, used: 0)
        }
        output.replaceSubrange(0..<nonce.count, with: nonce)
        var pending = nonce.count
        var total: Int64 = 0
        while true {
            let n = try source.readFully(into: &input, count: bufferSize)
            if n == 0 { break }
            if pending + n > output.count - AEADAlgorithm.tagLength {
                try sink.write(output[0..<pending])
                pending = 0
            }
            try context.update(input, count: n, into: &output, outputOffset: pending)
            pending += n
            total += Int64(n)
        }
        let tag = try context.finishSealing()
        output.replaceSubrange(pending..<(pending + tag.count), with: tag)
        try sink.write(output[0..<(pending + tag.count)])
        return Sealed(plaintextLength: total, tag: tag)
    }

    /// Decrypts nonce ‖ ciphertext ‖ tag from `source` into `sink`, returning normally only
    /// if the tag verifies. The last 16 bytes are held back as the tag, so the total length
    /// need not be known. Returns the plaintext length.
    @discardableResult
    public static func open(_ algorithm: AEADAlgorithm, key: SecureBytes, aad: [UInt8] = [],
                            from source: ByteSource, into sink: UnverifiedPlaintextSink, sizeHint: Int64? = nil) throws -> Int64 {
        let context = try AEADContext(algorithm, key: key, encrypting: false)
        let tagLength = AEADAlgorithm.tagLength
        var nonce = [UInt8](repeating: 0, count: AEADAlgorithm.standardNonceLength)
        guard try source.readFully(into: &nonce, count: nonce.count) == nonce.count else { throw CryptoError.truncated }
        try context.start(nonce: nonce, aad: aad)

        // input[0..<held] always holds bytes not yet decrypted; the final `tagLength` of them
        // may be the tag, so they are only decrypted once more data proves they are not.
        let bufferSize = bufferSize(for: sizeHint)
        var input = StreamBuffers.take(count: bufferSize + tagLength)
        var output = StreamBuffers.take(count: bufferSize)
        defer {
            StreamBuffers.give(&input, used: 0)
            StreamBuffers.give(&output, used: output.count)
        }
        var held = 0
        var total: Int64 = 0
        while true {
            let n: Int
            n = try source.readFully(into: &input, offset: held, count: input.count - held)
            held += n
            if n == 0 { break }
            let ready = held - tagLength
            if ready > 0 {
                try context.update(input, count: ready, into: &output)
                try sink.stage(output[0..<ready])
                total += Int64(ready)
                // Move the held-back tail to the front in place (a slice of `input` here
                // would copy the whole buffer on write).
                input.withUnsafeMutableBufferPointer { b in
                    b.baseAddress!.update(from: b.baseAddress! + ready, count: tagLength)
                }
                held = tagLength
            }
        }
        guard held == tagLength else { throw CryptoError.truncated }
        guard context.finishOpening(tag: Array(input[0..<tagLength])) else { throw CryptoError.authenticationFailed }
        return total
    }

    /// Checks the tag without keeping any plaintext.
    @discardableResult
    public static func verify(_ algorithm: AEADAlgorithm, key: SecureBytes, aad: [UInt8] = [],
                              from source: ByteSource, sizeHint: Int64? = nil) throws -> Int64 {
        try open(algorithm, key: key, aad: aad, from: source, into: DiscardingSink(), sizeHint: sizeHint)
    }
}
