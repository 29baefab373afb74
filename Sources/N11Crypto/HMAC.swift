internal import CSodium

/// HMAC-SHA256 with a 32-byte key (libsodium), for the archive header's MAC.
public enum HMACSHA256 {
    public static let tagLength = 32

    public static func authenticate(_ message: [UInt8], key: SecureBytes) throws(CryptoError) -> [UInt8] {
        guard key.count == 32 else { throw .invalidParameter("HMAC-SHA256 key of \(key.count) bytes") }
        Sodium.ensureInitialized()
        var tag = [UInt8](repeating: 0, count: tagLength)
        _ = key.withUnsafeBytes { k in
            crypto_auth_hmacsha256(&tag, message, UInt64(message.count), k.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return tag
    }

    /// True only if `tag` is the message's tag; compared in constant time.
    public static func verify(_ tag: [UInt8], for message: [UInt8], key: SecureBytes) -> Bool {
        guard key.count == 32, tag.count == tagLength else { return false }
        Sodium.ensureInitialized()
        return key.withUnsafeBytes { k in
            crypto_auth_hmacsha256_verify(tag, message, UInt64(message.count), k.baseAddress!.assumingMemoryBound(to: UInt8.self)) == 0
        }
    }
}
