internal import CLibCrypto

/// HKDF-SHA256 (RFC 5869) through OpenSSL 3's EVP_KDF, output in locked memory.
public enum HKDF {
    public static let maximumOutputLength = 255 * 32

    /// The fetched algorithm, looked up once: EVP_KDF_fetch walks OpenSSL's provider tables
    /// under a lock, and an archive derives a key per entry. An EVP_KDF is immutable and
    /// reference-counted, safe to share between threads; it is never freed.
    nonisolated(unsafe) private static let algorithm: OpaquePointer? = EVP_KDF_fetch(nil, "HKDF", nil)

    public static func deriveKey(inputKey: SecureBytes, salt: [UInt8], info: [UInt8],
                                 outputLength: Int = 32) throws(CryptoError) -> SecureBytes {
        guard outputLength > 0, outputLength <= maximumOutputLength else {
            throw .invalidParameter("HKDF-SHA256 output of \(outputLength) bytes (at most \(maximumOutputLength))")
        }
        let output = try SecureBytes(count: outputLength)
        try derive(inputKey: inputKey, salt: salt, info: info, into: output)
        return output
    }

    /// Derives `output.count` bytes into an existing locked buffer. An archive derives a key
    /// per entry; allocating locked memory for each (mmap, mprotect, mlock: nine system calls)
    /// cost more than the derivation, so the per-entry loops reuse one buffer.
    public static func derive(inputKey: SecureBytes, salt: [UInt8], info: [UInt8],
                              into output: SecureBytes) throws(CryptoError) {
        guard output.count > 0, output.count <= maximumOutputLength else {
            throw .invalidParameter("HKDF-SHA256 output of \(output.count) bytes (at most \(maximumOutputLength))")
        }
        try EVPKDF.derive(algorithm, named: "HKDF-SHA256", digest: "SHA256", key: inputKey, salt: salt, info: info, into: output)
    }
}
