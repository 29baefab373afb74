/// ECIES as Apple's Security framework does it (`SecKeyCreateEncryptedData` with
/// `eciesEncryptionCofactorX963SHA256AESGCM`, which FileLock uses), reimplemented from its
/// open-source definition (`SecKeyAdaptors.m`):
///
///     ephemeral key e; Z = x(e · recipient)   (cofactor 1 on P-256, so plain ECDH)
///     K = X9.63-KDF(hash, Z, SharedInfo = ephemeral public point)
///     output = ephemeral point (65) ‖ AES-GCM(key = K[0..<16], iv, no AAD) ‖ tag (16)
///
/// with `iv` sixteen zero bytes, or `K[16..<32]` in the VariableIV variants. The product
/// writes only the SHA-256, fixed-IV variant; the others open for the known-answer tests.
public enum AppleECIES {
    public struct Variant: Sendable, Equatable {
        public let digest: X963KDF.Digest
        public let variableIV: Bool

        public init(digest: X963KDF.Digest, variableIV: Bool) {
            self.digest = digest
            self.variableIV = variableIV
        }

        /// `eciesEncryptionCofactorX963SHA256AESGCM` (and the Standard one: the same on P-256).
        public static let cofactorX963SHA256AESGCM = Variant(digest: .sha256, variableIV: false)
    }

    /// AES-128 on curves of 256 bits or fewer.
    static let aesKeyBytes = 16
    static let ivBytes = 16
    /// What ECIES adds to a plaintext: the ephemeral point and the GCM tag.
    public static let overhead = P256PublicKey.byteCount + AEADAlgorithm.tagLength

    public static func seal(_ plaintext: SecureBytes, to recipient: P256PublicKey,
                            variant: Variant = .cofactorX963SHA256AESGCM) throws(CryptoError) -> [UInt8] {
        let ephemeral = try P256PrivateKey.generate()
        let (key, iv) = try keyAndIV(ephemeralPoint: ephemeral.publicKey.x963,
                                     sharedSecret: try ephemeral.sharedSecret(with: recipient), variant: variant)
        var plain = plaintext.withUnsafeBytes { Array($0) }
        defer { plain.wipe() }
        let sealed = try AEAD.seal(.aes128GCM, key: key, nonce: iv, plaintext: plain)
        return ephemeral.publicKey.x963 + sealed.ciphertext + sealed.tag
    }

    /// The plaintext, in locked memory, only if the tag verifies. A ciphertext whose
    /// ephemeral point is malformed or off the curve is refused before any ECDH.
    public static func open(_ ciphertext: [UInt8], with key: P256PrivateKey,
                            variant: Variant = .cofactorX963SHA256AESGCM) throws(CryptoError) -> SecureBytes {
        guard ciphertext.count >= overhead else { throw .authenticationFailed }
        let pointEnd = P256PublicKey.byteCount, tagStart = ciphertext.count - AEADAlgorithm.tagLength
        let point = Array(ciphertext[0..<pointEnd])
        let ephemeral: P256PublicKey
        do { ephemeral = try P256PublicKey(x963: point) } catch { throw .authenticationFailed }
        let (aesKey, iv) = try keyAndIV(ephemeralPoint: point, sharedSecret: try key.sharedSecret(with: ephemeral), variant: variant)
        var plain = try AEAD.open(.aes128GCM, key: aesKey, nonce: iv, ciphertext: Array(ciphertext[pointEnd..<tagStart]),
                                  tag: Array(ciphertext[tagStart...]))
        defer { plain.wipe() }
        return try SecureBytes(copying: plain)
    }

    private static func keyAndIV(ephemeralPoint: [UInt8], sharedSecret: SecureBytes,
                                 variant: Variant) throws(CryptoError) -> (SecureBytes, [UInt8]) {
        let length = aesKeyBytes + (variant.variableIV ? ivBytes : 0)
        let derived = try X963KDF.deriveKey(variant.digest, sharedSecret: sharedSecret, sharedInfo: ephemeralPoint,
                                            outputLength: length)
        let key = try derived.slice(0..<aesKeyBytes)
        let iv = variant.variableIV ? derived.withUnsafeBytes { Array($0[aesKeyBytes..<length]) }
                                    : [UInt8](repeating: 0, count: ivBytes)
        return (key, iv)
    }
}
