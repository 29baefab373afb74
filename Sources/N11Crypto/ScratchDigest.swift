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
        // One buffer, no array per field: `vault add` takes two or three digests a note.
        var message: [UInt8] = []
        message.reserveCapacity(fields.reduce(0) { $0 + 8 + $1.utf8.count })
        for field in fields {
            withUnsafeBytes(of: UInt64(field.utf8.count).littleEndian) { message.append(contentsOf: $0) }
            message.append(contentsOf: field.utf8)
        }
        // SipHash-2-4's 8 bytes, read as one UInt64.
        precondition(crypto_shorthash_BYTES == 8)
        var out: UInt64 = 0
        withUnsafeMutableBytes(of: &out) { out in
            key.withUnsafeBytes { k in
                guard let keyBytes = k.baseAddress?.assumingMemoryBound(to: UInt8.self),
                      let outBytes = out.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
                _ = crypto_shorthash(outBytes, message, UInt64(message.count), keyBytes)
            }
        }
        return Int64(littleEndian: Int64(bitPattern: out))
    }
}
