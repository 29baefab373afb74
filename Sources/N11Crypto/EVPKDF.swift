internal import CLibCrypto

/// One EVP_KDF derivation (HKDF, X9.63): the parameter list built in one place, the return
/// code checked in one place, the output written straight into locked memory.
enum EVPKDF {
    /// `salt` nil: the KDF takes none (X9.63). OpenSSL wants non-null pointers even for an
    /// empty salt or info; a one-byte array stands in, with length 0.
    static func derive(_ kdf: OpaquePointer?, named name: String, digest: String, key: SecureBytes,
                       salt: [UInt8]?, info: [UInt8], into output: SecureBytes) throws(CryptoError) {
        guard let kdf else { throw CryptoError.openSSL("EVP_KDF_fetch(\(name))") }
        guard let context = EVP_KDF_CTX_new(kdf) else { throw CryptoError.openSSL("EVP_KDF_CTX_new") }
        defer { EVP_KDF_CTX_free(context) }
        var saltBytes = salt.map { $0.isEmpty ? [0] : $0 } ?? [0]
        var infoBytes = info.isEmpty ? [0] : info
        var digestName = Array(digest.utf8CString)
        let rc: Int32 = key.withUnsafeBytes { ikm in
            output.withUnsafeMutableBytes { out in
                digestName.withUnsafeMutableBufferPointer { md in
                    saltBytes.withUnsafeMutableBytes { s in
                        infoBytes.withUnsafeMutableBytes { i in
                            var params = [
                                n11_kdf_digest(md.baseAddress!),
                                n11_kdf_key(UnsafeMutableRawPointer(mutating: ikm.baseAddress!), ikm.count),
                                n11_kdf_info(i.baseAddress!, info.count),
                            ]
                            if let salt { params.append(n11_kdf_salt(s.baseAddress!, salt.count)) }
                            params.append(n11_param_end())
                            return params.withUnsafeBufferPointer { p in
                                EVP_KDF_derive(context, out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, p.baseAddress)
                            }
                        }
                    }
                }
            }
        }
        guard rc == 1 else {
            throw CryptoError.openSSL("\(name) derive")
        }
    }
}
