internal import CLibCrypto

/// AES-256-CBC (PKCS#7 padding) and AES-256-CTR, one-shot, for Ciphio's `cbc:` and `ctr:`
/// messages (seed 002). Neither authenticates anything: a changed message decrypts to
/// something else (CTR) or, with luck, fails its padding (CBC). n11archive never uses them
/// for its own data.
public enum UnauthenticatedCipher: Sendable {
    case aes256CBC
    case aes256CTR

    public static let ivLength = 16

    private var cipher: OpaquePointer? {
        switch self {
        case .aes256CBC: return EVP_aes_256_cbc()
        case .aes256CTR: return EVP_aes_256_ctr()
        }
    }

    public func encrypt(_ plaintext: [UInt8], key: SecureBytes, iv: [UInt8]) throws(CryptoError) -> [UInt8] {
        try run(plaintext, key: key, iv: iv, encrypting: true)
    }

    /// Throws `authenticationFailed` when CBC padding does not check out (a wrong key, or a
    /// changed message; CBC cannot tell which, and most changes go unnoticed).
    public func decrypt(_ ciphertext: [UInt8], key: SecureBytes, iv: [UInt8]) throws(CryptoError) -> SecureBytes {
        var plain = try run(ciphertext, key: key, iv: iv, encrypting: false)
        defer { plain.wipe() }
        return try SecureBytes(copying: plain)
    }

    private func run(_ input: [UInt8], key: SecureBytes, iv: [UInt8], encrypting: Bool) throws(CryptoError) -> [UInt8] {
        guard key.count == 32 else { throw .invalidParameter("AES-256 key of \(key.count) bytes") }
        guard iv.count == Self.ivLength else { throw .invalidParameter("IV of \(iv.count) bytes (16 expected)") }
        guard input.count < 1 << 30 else { throw .invalidParameter("message of \(input.count) bytes") }
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError.openSSL("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: input.count + 16)
        var written: Int32 = 0, final: Int32 = 0
        let ok: Bool = key.withUnsafeBytes { k in
            guard EVP_CipherInit_ex(context, cipher, nil, k.baseAddress!.assumingMemoryBound(to: UInt8.self), iv, encrypting ? 1 : 0) == 1 else {
                return false
            }
            guard input.isEmpty || EVP_CipherUpdate(context, &output, &written, input, Int32(input.count)) == 1 else { return false }
            return output.withUnsafeMutableBufferPointer { out in
                EVP_CipherFinal_ex(context, out.baseAddress! + Int(written), &final) == 1
            }
        }
        guard ok else {
            output.wipe()
            if !encrypting {
                ERR_clear_error()
                throw .authenticationFailed
            }
            throw CryptoError.openSSL("AES \(self == .aes256CBC ? "CBC" : "CTR")")
        }
        return Array(output.prefix(Int(written + final)))
    }
}
