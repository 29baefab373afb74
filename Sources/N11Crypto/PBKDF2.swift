internal import CLibCrypto

/// PBKDF2-HMAC-SHA256 (RFC 8018) through OpenSSL, output in locked memory. Only for Ciphio's
/// text messages (seed 002: 100,000 iterations); n11archive's own keys use Argon2id.
public enum PBKDF2 {
    public static func deriveKey(password: SecureBytes, salt: [UInt8], iterations: Int,
                                 length: Int = 32) throws(CryptoError) -> SecureBytes {
        guard iterations >= 1, iterations <= 10_000_000, length >= 1, length <= 1024 else {
            throw .invalidParameter("PBKDF2 with \(iterations) iterations and \(length) bytes")
        }
        let output = try SecureBytes(count: length)
        let rc: Int32 = password.withUnsafeBytes { pw in
            output.withUnsafeMutableBytes { out in
                PKCS5_PBKDF2_HMAC(pw.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(pw.count), salt, Int32(salt.count),
                                  Int32(iterations), EVP_sha256(), Int32(length), out.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        guard rc == 1 else {
            throw CryptoError.openSSL("PKCS5_PBKDF2_HMAC")
        }
        return output
    }
}
