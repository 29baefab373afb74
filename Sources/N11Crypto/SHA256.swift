import CLibCrypto
import N11System

/// Streaming SHA-256 (OpenSSL EVP), for the plaintext digests archives carry.
public final class SHA256Digest {
    private let context: OpaquePointer?

    /// EVP_MD_CTX_new fails only when out of memory; then every update is a no-op and
    /// `finish()` returns all zeros, which matches no real digest, so a check fails safe.
    public init() {
        context = EVP_MD_CTX_new()
        EVP_DigestInit_ex(context, Self.algorithm, nil)
    }

    /// Fetched once rather than looked up by EVP_sha256() on every init (see `AEADAlgorithm`).
    nonisolated(unsafe) private static let algorithm = EVP_MD_fetch(nil, "SHA256", nil)

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { raw in update(raw: raw) }
    }

    /// Hashes bytes in place (e.g. inside `SecureBytes.withUnsafeBytes`), copying nothing.
    public func update(raw: UnsafeRawBufferPointer) {
        _ = EVP_DigestUpdate(context, raw.baseAddress, raw.count)
    }

    /// The digest; the object can be used again after (it restarts).
    public func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &out, &length)
        EVP_DigestInit_ex(context, Self.algorithm, nil)
        return out
    }

    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        let d = SHA256Digest()
        d.update(bytes[...])
        return d.finish()
    }
}

/// Passes a source through, hashing it; at the end checks length and digest against what
/// was expected and throws `contentMismatch` instead of reporting the end.
public final class DigestCheckingSource: ByteSource {
    private let source: ByteSource
    private let digest = SHA256Digest()
    private let expectedDigest: [UInt8]
    private let expectedLength: Int64
    private var length: Int64 = 0
    private var verifiedEnd = false

    public init(_ source: ByteSource, expectedSHA256: [UInt8], expectedLength: Int64) {
        self.source = source
        expectedDigest = expectedSHA256
        self.expectedLength = expectedLength
    }

    public func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        if verifiedEnd { return 0 }
        let n = try source.read(into: &buffer, offset: offset, count: count)
        if n == 0 {
            guard length == expectedLength, digest.finish() == expectedDigest else { throw CryptoError.contentMismatch }
            verifiedEnd = true
            return 0
        }
        length += Int64(n)
        guard length <= expectedLength else { throw CryptoError.contentMismatch }
        digest.update(buffer[offset..<(offset + n)])
        return n
    }
}

/// A plaintext sink that hashes what it gets and hands it on to another staging sink, if any.
public final class DigestSink: UnverifiedPlaintextSink {
    private let digest = SHA256Digest()
    private let next: UnverifiedPlaintextSink?
    public private(set) var length: Int64 = 0
    public init(forwardingTo next: UnverifiedPlaintextSink? = nil) { self.next = next }
    public func stage(_ bytes: ArraySlice<UInt8>) throws {
        digest.update(bytes)
        length += Int64(bytes.count)
        try next?.stage(bytes)
    }
    public func finish() -> [UInt8] { digest.finish() }
}

/// Passes a source through and hashes it; `sha256` is valid once the source has ended.
public final class HashingSource: ByteSource {
    private let source: ByteSource
    private let digest = SHA256Digest()
    public private(set) var sha256: [UInt8] = []

    public init(_ source: ByteSource) { self.source = source }

    public func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        let n = try source.read(into: &buffer, offset: offset, count: count)
        if n == 0 {
            if sha256.isEmpty { sha256 = digest.finish() }
        } else {
            digest.update(buffer[offset..<(offset + n)])
        }
        return n
    }
}
