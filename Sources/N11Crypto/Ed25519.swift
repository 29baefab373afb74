internal import CSodium

/// Ed25519 (RFC 8032) through libsodium: what signs a version 3 archive's header (DESIGN.md
/// §8.4). Chosen over P-256 ECDSA because a signature is deterministic (no per-signature
/// nonce to get wrong), keys and signatures are small, and libsodium's verification is
/// strict (canonical encodings only, no small-order keys).
public struct Ed25519PublicKey: Sendable, Equatable {
    public static let byteCount = 32
    public static let signatureByteCount = 64
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == Self.byteCount else { throw .invalidParameter("an Ed25519 public key is 32 bytes") }
        self.bytes = bytes
    }

    /// DER SubjectPublicKeyInfo: SEQUENCE { SEQUENCE { OID 1.3.101.112 (id-Ed25519) } BIT STRING key }
    /// (RFC 8410), the prefix before the 32 key bytes.
    static let spkiPrefix: [UInt8] = [0x30, 0x2A, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x03, 0x21, 0x00]

    /// A key from its DER SubjectPublicKeyInfo (what `openssl pkey -pubout` writes for Ed25519).
    public init(subjectPublicKeyInfo der: [UInt8]) throws(CryptoError) {
        guard der.count == Self.spkiPrefix.count + Self.byteCount, Array(der.prefix(Self.spkiPrefix.count)) == Self.spkiPrefix else {
            throw .invalidParameter("not an Ed25519 SubjectPublicKeyInfo")
        }
        try self.init(bytes: Array(der.dropFirst(Self.spkiPrefix.count)))
    }

    /// The key as a DER SubjectPublicKeyInfo (RFC 8410), which OpenSSL reads.
    public var subjectPublicKeyInfo: [UInt8] { Self.spkiPrefix + bytes }

    /// SHA-256 of the 32 key bytes: a name for the key that does not depend on its file form.
    public var fingerprint: [UInt8] {
        get throws(CryptoError) { try SHA256Digest.hash(bytes) }
    }

    /// Whether `signature` is this key's signature of `message`.
    public func verifies(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        Sodium.ensureInitialized()
        guard signature.count == Self.signatureByteCount else { return false }
        return message.withUnsafeBufferPointer { m in
            crypto_sign_verify_detached(signature, m.baseAddress, UInt64(m.count), bytes) == 0
        }
    }
}

/// An Ed25519 private key (libsodium's 64-byte form: the seed and the public key), in locked memory.
public final class Ed25519SigningKey: @unchecked Sendable {
    private let secret: SecureBytes
    public let publicKey: Ed25519PublicKey

    /// A new random key.
    public static func generate() throws(CryptoError) -> Ed25519SigningKey {
        try Ed25519SigningKey(seed: try SecureBytes(randomCount: 32))
    }

    /// The key of a 32-byte seed (RFC 8032's "private key").
    public init(seed: SecureBytes) throws(CryptoError) {
        Sodium.ensureInitialized()
        guard seed.count == 32 else { throw .invalidParameter("an Ed25519 seed is 32 bytes") }
        secret = try SecureBytes(count: 64)
        var publicBytes = [UInt8](repeating: 0, count: Ed25519PublicKey.byteCount)
        let rc = secret.withUnsafeMutableBytes { sk in
            seed.withUnsafeBytes { s in
                crypto_sign_seed_keypair(&publicBytes, sk.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                         s.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        guard rc == 0 else { throw .library("crypto_sign_seed_keypair", openSSL: nil) }
        publicKey = try Ed25519PublicKey(bytes: publicBytes)
    }

    /// The 32-byte seed the key was made from (what a key store keeps).
    public func seed() throws(CryptoError) -> SecureBytes { try secret.slice(0..<32) }

    public func sign(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: Ed25519PublicKey.signatureByteCount)
        let rc = secret.withUnsafeBytes { sk in
            message.withUnsafeBufferPointer { m in
                crypto_sign_detached(&signature, nil, m.baseAddress, UInt64(m.count), sk.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        guard rc == 0 else { throw .library("crypto_sign_detached", openSSL: nil) }
        return signature
    }
}
