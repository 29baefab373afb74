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
        let output = try SecureBytes(count: outputLength)
        try EVPKDF.derive(algorithm, named: "X9.63 KDF", digest: digest.rawValue, key: sharedSecret, salt: nil, info: sharedInfo, into: output)
        return output
    }
}
