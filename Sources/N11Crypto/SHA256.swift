internal import CLibCrypto
import N11System

/// A streaming message digest (OpenSSL EVP). Every OpenSSL return code is checked: a digest
/// that failed must never come out as bytes (an all-zero digest would be recorded by `vault
/// add` as the item's). `update` stays cheap and does not throw; a failure there is
/// remembered and thrown by `finish()`.
public class MessageDigest {
    private let context: OpaquePointer
    private let algorithm: OpaquePointer?
    private let length: Int
    /// The first OpenSSL call that failed since the last `finish()`, with OpenSSL's error.
    private var failure: CryptoError?

    /// `algorithm` is the fetched digest, of `length` bytes; nil only in a test that checks
    /// failures surface.
    init(algorithm: OpaquePointer?, length: Int) throws(CryptoError) {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.openSSL("EVP_MD_CTX_new") }
        self.context = context
        self.algorithm = algorithm
        self.length = length
        restart()
    }

    deinit { EVP_MD_CTX_free(context) }

    private func restart() {
        failure = EVP_DigestInit_ex(context, algorithm, nil) == 1 ? nil : CryptoError.openSSL("EVP_DigestInit_ex")
    }

    public func update(_ bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBytes { raw in update(raw: raw) }
    }

    /// Hashes bytes in place (e.g. inside `SecureBytes.withUnsafeBytes`), copying nothing.
    public func update(raw: UnsafeRawBufferPointer) {
        guard failure == nil, raw.count > 0 else { return }
        if EVP_DigestUpdate(context, raw.baseAddress, raw.count) != 1 {
            failure = CryptoError.openSSL("EVP_DigestUpdate")
        }
    }

    /// The digest; the object can be used again after (it restarts). Throws if any call
    /// since the last restart failed.
    public func finish() throws(CryptoError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: length)
        var written: UInt32 = 0
        if failure == nil && (EVP_DigestFinal_ex(context, &out, &written) != 1 || Int(written) != length) {
            failure = CryptoError.openSSL("EVP_DigestFinal_ex")
        }
        let failed = failure
        restart()
        if let failed { throw failed }
        return out
    }
}

/// Streaming SHA-256, for the plaintext digests archives carry and an archive's own digest.
public final class SHA256Digest: MessageDigest {
    public convenience init() throws(CryptoError) { try self.init(algorithm: Self.sha256) }

    /// `algorithm` is the fetched digest; nil only in a test that checks failures surface.
    init(algorithm: OpaquePointer?) throws(CryptoError) { try super.init(algorithm: algorithm, length: 32) }

    /// Fetched once rather than looked up by EVP_sha256() on every init (see `AEADAlgorithm`).
    nonisolated(unsafe) private static let sha256 = EVP_MD_fetch(nil, "SHA256", nil)

    public static func hash(_ bytes: [UInt8]) throws(CryptoError) -> [UInt8] {
        let d = try SHA256Digest()
        d.update(bytes[...])
        return try d.finish()
    }
}

/// Streaming SHA-1. Never for anything n11archive vouches for: only to compare an upload with
/// the SHA-1 a remote keeps of it (sftp's `sha1sum`, B2), a check against damage on the way
/// (the archive's own SHA-256 is what the record holds, and its tags what a reader trusts).
public final class SHA1Digest: MessageDigest {
    /// Throws at once where OpenSSL has no SHA-1 (a FIPS-only configuration), not at `finish`.
    public init() throws(CryptoError) {
        guard let algorithm = Self.sha1 else { throw CryptoError.openSSL("EVP_MD_fetch(SHA1)") }
        try super.init(algorithm: algorithm, length: 20)
    }

    nonisolated(unsafe) private static let sha1 = EVP_MD_fetch(nil, "SHA1", nil)
}

/// Streaming MD5, for the same comparison only (S3's and Azure's object hashes).
public final class MD5Digest: MessageDigest {
    /// Throws at once where OpenSSL has no MD5 (a FIPS-only configuration), not at `finish`.
    public init() throws(CryptoError) {
        guard let algorithm = Self.md5 else { throw CryptoError.openSSL("EVP_MD_fetch(MD5)") }
        try super.init(algorithm: algorithm, length: 16)
    }

    nonisolated(unsafe) private static let md5 = EVP_MD_fetch(nil, "MD5", nil)
}

/// Passes a source through, hashing it; at the end checks length and digest against what
/// was expected and throws `contentMismatch` instead of reporting the end.
public final class DigestCheckingSource: ByteSource {
    private let source: ByteSource
    private let digest: SHA256Digest
    private let expectedDigest: [UInt8]
    private let expectedLength: Int64
    private var length: Int64 = 0
    private var verifiedEnd = false

    public init(_ source: ByteSource, expectedSHA256: [UInt8], expectedLength: Int64) throws(CryptoError) {
        self.source = source
        digest = try SHA256Digest()
        expectedDigest = expectedSHA256
        self.expectedLength = expectedLength
    }

    public func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        if verifiedEnd { return 0 }
        let n = try source.read(into: &buffer, offset: offset, count: count)
        if n == 0 {
            guard length == expectedLength, try digest.finish() == expectedDigest else { throw CryptoError.contentMismatch }
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
    private let digest: SHA256Digest
    private let next: UnverifiedPlaintextSink?
    public private(set) var length: Int64 = 0
    public init(forwardingTo next: UnverifiedPlaintextSink? = nil) throws(CryptoError) {
        self.next = next
        digest = try SHA256Digest()
    }
    public func stage(_ bytes: ArraySlice<UInt8>) throws {
        digest.update(bytes)
        length += Int64(bytes.count)
        try next?.stage(bytes)
    }
    public func finish() throws(CryptoError) -> [UInt8] { try digest.finish() }
}

/// Passes a source through and hashes it; `sha256` is valid once the source has ended.
public final class HashingSource: ByteSource {
    private let source: ByteSource
    private let digest: SHA256Digest
    public private(set) var sha256: [UInt8] = []

    public init(_ source: ByteSource) throws(CryptoError) {
        self.source = source
        digest = try SHA256Digest()
    }

    public func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        let n = try source.read(into: &buffer, offset: offset, count: count)
        if n == 0 {
            if sha256.isEmpty { sha256 = try digest.finish() }
        } else {
            digest.update(buffer[offset..<(offset + n)])
        }
        return n
    }
}
