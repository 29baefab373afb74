internal import CSodium

/// A 64-bit digest under a key drawn afresh for each instance (libsodium's
/// `crypto_shorthash`, SipHash-2-4), for digests that go to a scratch file on disk
/// (`ScratchKeyTable`): without the key, which stays in locked memory and dies with the
/// process, a digest cannot be matched to a known name or content. Swift's `Hasher` is
/// seeded per process too, but `SWIFT_DETERMINISTIC_HASHING` fixes its seed.
public final class ScratchDigest: @unchecked Sendable {
    private let key: SecureBytes

    public init() throws(CryptoError) {
        Sodium.ensureInitialized()
        key = try SecureBytes(randomCount: Int(crypto_shorthash_KEYBYTES))
    }

    /// The digest of `fields`, each length-prefixed so that no two lists of fields run together.
    public func digest(_ fields: [String]) -> Int64 {
        var message: [UInt8] = []
        for field in fields {
            let bytes = Array(field.utf8)
            withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { message.append(contentsOf: $0) }
            message.append(contentsOf: bytes)
        }
        var out = [UInt8](repeating: 0, count: Int(crypto_shorthash_BYTES))
        key.withUnsafeBytes { k in
            guard let keyBytes = k.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
            _ = crypto_shorthash(&out, message, UInt64(message.count), keyBytes)
        }
        return out.withUnsafeBytes { Int64(littleEndian: $0.loadUnaligned(as: Int64.self)) }
    }
}
