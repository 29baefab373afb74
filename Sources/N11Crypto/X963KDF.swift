internal import CLibCrypto

/// ANSI X9.63 KDF (SEC 1 §3.6.1): `Hash(Z ‖ counter ‖ SharedInfo)` for counter 1, 2, …,
/// through OpenSSL 3's EVP_KDF "X963KDF". Apple's ECIES derives its AES key with it.
public enum X963KDF {
    public enum Digest: String, Sendable, CaseIterable {
        case sha1 = "SHA1", sha224 = "SHA224", sha256 = "SHA256", sha384 = "SHA384", sha512 = "SHA512"
    }

    nonisolated(unsafe) private static let algorithm: OpaquePointer? = EVP_KDF_fetch(nil, "X963KDF", nil)

    public static func deriveKey(_ digest: Digest = .sha256, sharedSecret: SecureBytes, sharedInfo: [UInt8],
                                 outputLength: Int) throws(CryptoError) -> SecureBytes {
        guard outputLength > 0, outputLength <= 1 << 16 else { throw .invalidParameter("X9.63 KDF output of \(outputLength) bytes") }
        guard let kdf = algorithm else { throw .library("EVP_KDF_fetch(X963KDF)") }
        guard let context = EVP_KDF_CTX_new(kdf) else { throw .library("EVP_KDF_CTX_new") }
        defer { EVP_KDF_CTX_free(context) }
        let output = try SecureBytes(count: outputLength)
        var infoBytes = sharedInfo.isEmpty ? [0] : sharedInfo
        var name = Array(digest.rawValue.utf8CString)
        let rc: Int32 = sharedSecret.withUnsafeBytes { z in
            output.withUnsafeMutableBytes { out in
                name.withUnsafeMutableBufferPointer { md in
                    infoBytes.withUnsafeMutableBytes { info in
                        let params = [
                            n11_kdf_digest(md.baseAddress!),
                            n11_kdf_key(UnsafeMutableRawPointer(mutating: z.baseAddress!), z.count),
                            n11_kdf_info(info.baseAddress!, sharedInfo.count),
                            n11_param_end(),
                        ]
                        return params.withUnsafeBufferPointer { p in
                            EVP_KDF_derive(context, out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, p.baseAddress)
                        }
                    }
                }
            }
        }
        guard rc == 1 else {
            ERR_clear_error()
            throw .library("X9.63 KDF derive")
        }
        return output
    }
}
