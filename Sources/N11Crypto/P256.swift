internal import CLibCrypto

/// A P-256 public key as the uncompressed X9.63 point `04 ‖ X ‖ Y` (65 bytes): the form
/// Apple's `SecKeyCopyExternalRepresentation` gives, FileLock's PEM files hold, and ECIES
/// puts in front of its ciphertext. Made only from a point on the curve.
public struct P256PublicKey: Sendable, Equatable, Hashable {
    public static let byteCount = 65
    public let x963: [UInt8]

    /// Refuses wrong lengths, compressed or hybrid encodings, the point at infinity and any
    /// point not on the curve: ECDH with such a point could leak the private key.
    public init(x963 bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count == Self.byteCount, bytes[0] == 0x04 else {
            throw .invalidKey("a P-256 public key is a 65-byte uncompressed point (04 ‖ X ‖ Y), not \(bytes.count) bytes")
        }
        try P256Curve.checkPoint(bytes)
        x963 = bytes
    }

    /// The DER of a SubjectPublicKeyInfo up to the point: SEQUENCE { SEQUENCE { id-ecPublicKey,
    /// prime256v1 }, BIT STRING (66 bytes) }. DER has one encoding of a named P-256 key, so a
    /// standard `-----BEGIN PUBLIC KEY-----` is exactly these bytes and the point.
    static let spkiPrefix: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01,
        0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ]

    /// Reads a DER SubjectPublicKeyInfo of a P-256 key named by its OID. Explicit curve
    /// parameters are refused: OpenSSL matches them to the named curve even with a changed
    /// cofactor (Wycheproof ECDH cases 359 and 361), and no tool we exchange keys with writes them.
    public init(subjectPublicKeyInfo der: [UInt8]) throws(CryptoError) {
        guard der.count == Self.spkiPrefix.count + Self.byteCount, der.starts(with: Self.spkiPrefix) else {
            throw .invalidKey("not a P-256 SubjectPublicKeyInfo (named curve, uncompressed point)")
        }
        try self.init(x963: Array(der[Self.spkiPrefix.count...]))
    }

    /// The key as a DER SubjectPublicKeyInfo (what `openssl pkey -pubin` and most tools read).
    public var subjectPublicKeyInfo: [UInt8] { Self.spkiPrefix + x963 }

    /// SHA-256 of the point: a name for the key that does not depend on its file form.
    public var fingerprint: [UInt8] {
        get throws(CryptoError) {
            let digest = try SHA256Digest()
            digest.update(x963[...])
            return try digest.finish()
        }
    }
}

/// A P-256 private key: the scalar `d` (32 bytes, big-endian) in locked memory. OpenSSL
/// objects made from it live only for one operation and are cleared when freed.
public final class P256PrivateKey: @unchecked Sendable {
    public static let scalarByteCount = 32
    public let scalar: SecureBytes
    public let publicKey: P256PublicKey

    /// A fresh key from OpenSSL's generator.
    public static func generate() throws(CryptoError) -> P256PrivateKey {
        let key = try EVPKey.generateP256()
        return try P256PrivateKey(scalar: try key.privateScalar())
    }

    /// Refuses a scalar outside 1…n−1.
    public init(scalar: SecureBytes) throws(CryptoError) {
        guard scalar.count == Self.scalarByteCount else {
            throw .invalidKey("a P-256 private key is 32 bytes, not \(scalar.count)")
        }
        publicKey = try P256PublicKey(x963: try P256Curve.publicPoint(of: scalar))
        self.scalar = scalar
    }

    /// Reads a PEM private key: PKCS#8 (`ENCRYPTED PRIVATE KEY` with `passphrase`, or
    /// `PRIVATE KEY`) or SEC1 (`EC PRIVATE KEY`). It must be a P-256 key.
    public convenience init(pem: [UInt8], passphrase: SecureBytes?) throws(CryptoError) {
        let key = try EVPKey(privatePEM: pem, passphrase: passphrase)
        try self.init(scalar: try key.privateScalar())
    }

    /// Reads a DER SEC1 `ECPrivateKey` (RFC 5915), as `openssl ecparam -genkey` writes.
    public convenience init(sec1DER der: [UInt8]) throws(CryptoError) {
        let key = try EVPKey(sec1DER: der)
        try self.init(scalar: try key.privateScalar())
    }

    /// The key as passphrase-protected PKCS#8 PEM: PBES2 with PBKDF2-HMAC-SHA256
    /// (`iterations`) and AES-256-CBC, which OpenSSL, Python `cryptography` and Apple's
    /// tools read.
    /// The longest passphrase a PEM private key can have and still be read back: OpenSSL's
    /// PEM passphrase callbacks (ours, `openssl pkey -passin`) hold 1,024 bytes with a NUL.
    public static let maximumPEMPassphraseLength = 1023

    /// Whether `passphrase` can seal a PEM key that every reader opens again: at most 1,023
    /// bytes, and no NUL byte (the callbacks read it as a C string).
    public static func isUsablePEMPassphrase(_ passphrase: SecureBytes) -> Bool {
        passphrase.count <= maximumPEMPassphraseLength && passphrase.withUnsafeBytes { !$0.contains(0) }
    }

    public func encryptedPKCS8PEM(passphrase: SecureBytes, iterations: Int = 600_000) throws(CryptoError) -> [UInt8] {
        // Refused rather than written: a key file nothing can open again is a lost key.
        guard Self.isUsablePEMPassphrase(passphrase) else {
            throw .invalidParameter("a PEM key's passphrase must be at most \(Self.maximumPEMPassphraseLength) bytes without a NUL byte")
        }
        return try EVPKey(scalar: scalar, publicPoint: publicKey.x963).encryptedPKCS8PEM(passphrase: passphrase, iterations: iterations)
    }

    /// ECDH: the x-coordinate of `d · peer` (32 bytes), in locked memory.
    public func sharedSecret(with peer: P256PublicKey) throws(CryptoError) -> SecureBytes {
        let mine = try EVPKey(scalar: scalar, publicPoint: publicKey.x963)
        return try mine.derive(with: try EVPKey(publicPoint: peer.x963))
    }
}

/// The curve's arithmetic that EVP does not offer: checking an encoded point and computing
/// the public point of a scalar.
enum P256Curve {
    nonisolated(unsafe) static let group: OpaquePointer? = EC_GROUP_new_by_curve_name(n11_nid_p256())

    static func checkPoint(_ bytes: [UInt8]) throws(CryptoError) {
        guard let group, let point = EC_POINT_new(group) else { throw CryptoError.openSSL("EC_POINT_new") }
        defer { EC_POINT_free(point) }
        // oct2point refuses a point off the curve; both checks are repeated to be explicit.
        let decoded = EC_POINT_oct2point(group, point, bytes, bytes.count, nil) == 1
        ERR_clear_error()
        guard decoded, EC_POINT_is_on_curve(group, point, nil) == 1, EC_POINT_is_at_infinity(group, point) == 0 else {
            ERR_clear_error()
            throw .invalidKey("the public key is not a point on the P-256 curve")
        }
    }

    static func publicPoint(of scalar: SecureBytes) throws(CryptoError) -> [UInt8] {
        guard let group, let point = EC_POINT_new(group) else { throw CryptoError.openSSL("EC_POINT_new") }
        defer { EC_POINT_free(point) }
        let d = try bignum(scalar)
        defer { BN_clear_free(d) }
        guard let order = EC_GROUP_get0_order(group), BN_is_zero(d) == 0, BN_cmp(d, order) < 0 else {
            throw .invalidKey("the private key is not a P-256 scalar (1 to n−1)")
        }
        guard EC_POINT_mul(group, point, d, nil, nil, nil) == 1 else {
            throw CryptoError.openSSL("EC_POINT_mul")
        }
        var out = [UInt8](repeating: 0, count: P256PublicKey.byteCount)
        guard EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, &out, out.count, nil) == out.count else {
            throw CryptoError.openSSL("EC_POINT_point2oct")
        }
        return out
    }

    /// A BIGNUM in OpenSSL's secure heap (when it has one), freed by the caller with BN_clear_free.
    static func bignum(_ scalar: SecureBytes) throws(CryptoError) -> OpaquePointer {
        guard let bn = BN_secure_new() else { throw CryptoError.openSSL("BN_secure_new") }
        let ok = scalar.withUnsafeBytes { raw in
            BN_bin2bn(raw.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(raw.count), bn) != nil
        }
        guard ok else {
            BN_clear_free(bn)
            throw CryptoError.openSSL("BN_bin2bn")
        }
        return bn
    }
}

/// One EVP_PKEY, owned here and freed in deinit (OpenSSL clears private key material when
/// it frees it). Every OpenSSL call on keys goes through this type.
final class EVPKey {
    let pkey: OpaquePointer

    private init(owning pkey: OpaquePointer) { self.pkey = pkey }
    deinit { EVP_PKEY_free(pkey) }

    private static func check(_ rc: Int32, _ what: String) throws(CryptoError) {
        guard rc == 1 else {
            throw CryptoError.openSSL(what)
        }
    }

    static func generateP256() throws(CryptoError) -> EVPKey {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(ctx) }
        try check(EVP_PKEY_keygen_init(ctx), "EVP_PKEY_keygen_init")
        try check(EVP_PKEY_CTX_set_group_name(ctx, "P-256"), "EVP_PKEY_CTX_set_group_name")
        var pkey: OpaquePointer?
        try check(EVP_PKEY_generate(ctx, &pkey), "EVP_PKEY_generate")
        guard let pkey else { throw CryptoError.openSSL("EVP_PKEY_generate") }
        return EVPKey(owning: pkey)
    }

    /// A key from its parts: the public point alone, or with the scalar.
    private static func fromData(scalar: SecureBytes?, publicPoint: [UInt8]) throws(CryptoError) -> OpaquePointer {
        guard let builder = OSSL_PARAM_BLD_new() else { throw CryptoError.openSSL("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        var d: OpaquePointer?
        defer { if let d { BN_clear_free(d) } }
        try check(n11_ec_push_group_p256(builder), "OSSL_PARAM_BLD_push(group)")
        try check(publicPoint.withUnsafeBufferPointer { n11_ec_push_public(builder, $0.baseAddress, $0.count) }, "OSSL_PARAM_BLD_push(pub)")
        if let scalar {
            d = try P256Curve.bignum(scalar)
            try check(n11_ec_push_private(builder, d), "OSSL_PARAM_BLD_push(priv)")
        }
        guard let params = OSSL_PARAM_BLD_to_param(builder) else { throw CryptoError.openSSL("OSSL_PARAM_BLD_to_param") }
        defer { OSSL_PARAM_free(params) }   // the BIGNUM was secure, so is this block
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(ctx) }
        try check(EVP_PKEY_fromdata_init(ctx), "EVP_PKEY_fromdata_init")
        var pkey: OpaquePointer?
        let selection = scalar == nil ? n11_selection_public() : n11_selection_keypair()
        guard EVP_PKEY_fromdata(ctx, &pkey, selection, params) == 1, let pkey else {
            ERR_clear_error()
            throw .invalidKey("OpenSSL refused the P-256 key")
        }
        return pkey
    }

    convenience init(publicPoint: [UInt8]) throws(CryptoError) {
        self.init(owning: try Self.fromData(scalar: nil, publicPoint: publicPoint))
    }

    convenience init(scalar: SecureBytes, publicPoint: [UInt8]) throws(CryptoError) {
        self.init(owning: try Self.fromData(scalar: scalar, publicPoint: publicPoint))
    }

    convenience init(sec1DER der: [UInt8]) throws(CryptoError) {
        let pkey: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PrivateKey(EVP_PKEY_EC, nil, &cursor, buffer.count)
        }
        guard let pkey else {
            ERR_clear_error()
            throw .invalidKey("not a DER EC private key")
        }
        self.init(owning: pkey)
        try requireP256()
    }

    convenience init(privatePEM pem: [UInt8], passphrase: SecureBytes?) throws(CryptoError) {
        guard let bio = pem.withUnsafeBytes({ BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }) else { throw CryptoError.openSSL("BIO_new_mem_buf") }
        defer { BIO_free(bio) }
        // OpenSSL wants a NUL-terminated passphrase; made in locked memory. One its callback
        // would cut or refuse is said to be so, not reported as a wrong passphrase.
        var terminated: SecureBytes?
        if let passphrase {
            guard P256PrivateKey.isUsablePEMPassphrase(passphrase) else {
                throw .invalidKey("a passphrase of more than \(P256PrivateKey.maximumPEMPassphraseLength) bytes, or with a NUL byte, cannot open a PEM key")
            }
            let copy = try SecureBytes(count: passphrase.count + 1)
            copy.withUnsafeMutableBytes { out in passphrase.withUnsafeBytes { out.copyMemory(from: $0) } }
            terminated = copy
        }
        let pkey: OpaquePointer? = {
            guard let terminated else { return n11_pem_read_private(bio, nil) }
            return terminated.withUnsafeBytes { n11_pem_read_private(bio, $0.baseAddress!.assumingMemoryBound(to: CChar.self)) }
        }()
        guard let pkey else {
            ERR_clear_error()
            throw passphrase == nil ? .invalidKey("not a PEM private key, or it needs a passphrase")
                                    : .invalidKey("wrong passphrase, or not a PEM private key")
        }
        self.init(owning: pkey)
        try requireP256()
    }

    private func requireP256() throws(CryptoError) {
        guard EVP_PKEY_is_a(pkey, "EC") == 1 else { throw .invalidKey("not an elliptic-curve key") }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard n11_ec_get_group(pkey, &name, name.count, &length) == 1 else {
            ERR_clear_error()
            throw .invalidKey("an elliptic-curve key without a named curve")
        }
        let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard group == "prime256v1" || group == "P-256" else { throw .invalidKey("a \(group) key, not P-256") }
    }

    func publicPoint() throws(CryptoError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 133)
        var length = 0
        guard n11_ec_get_public(pkey, &out, out.count, &length) == 1 else {
            ERR_clear_error()
            throw .invalidKey("the key has no public point")
        }
        return Array(out.prefix(length))
    }

    func privateScalar() throws(CryptoError) -> SecureBytes {
        var d: OpaquePointer?
        guard n11_ec_get_private(pkey, &d) == 1, let d else {
            ERR_clear_error()
            throw .invalidKey("the key has no private part")
        }
        defer { BN_clear_free(d) }
        let out = try SecureBytes(count: P256PrivateKey.scalarByteCount)
        let written = out.withUnsafeMutableBytes { raw in
            BN_bn2binpad(d, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(raw.count))
        }
        guard written == Int32(P256PrivateKey.scalarByteCount) else { throw .invalidKey("the private scalar is too long") }
        return out
    }

    func derive(with peer: EVPKey) throws(CryptoError) -> SecureBytes {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { throw CryptoError.openSSL("EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(ctx) }
        try Self.check(EVP_PKEY_derive_init(ctx), "EVP_PKEY_derive_init")
        guard EVP_PKEY_derive_set_peer(ctx, peer.pkey) == 1 else {
            ERR_clear_error()
            throw .invalidKey("the public key cannot be used for ECDH")
        }
        var length = 0
        try Self.check(EVP_PKEY_derive(ctx, nil, &length), "EVP_PKEY_derive(size)")
        guard length == 32 else { throw .library("ECDH secret of \(length) bytes") }
        let out = try SecureBytes(count: length)
        let rc = out.withUnsafeMutableBytes { raw in
            EVP_PKEY_derive(ctx, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), &length)
        }
        try Self.check(rc, "EVP_PKEY_derive")
        return out
    }

    func encryptedPKCS8PEM(passphrase: SecureBytes, iterations: Int) throws(CryptoError) -> [UInt8] {
        guard let info = EVP_PKEY2PKCS8(pkey) else { throw CryptoError.openSSL("EVP_PKEY2PKCS8") }
        defer { PKCS8_PRIV_KEY_INFO_free(info) }
        // pbe_nid −1: PBES2, here with AES-256-CBC; OpenSSL 3 picks HMAC-SHA256 as the PRF.
        // A random 16-byte salt (with none given OpenSSL makes one of 8, below NIST's 128 bits).
        let sealed = passphrase.withUnsafeBytes { raw in
            PKCS8_encrypt(-1, EVP_aes_256_cbc(), raw.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(raw.count),
                          nil, 16, Int32(iterations), info)
        }
        guard let sealed else {
            throw CryptoError.openSSL("PKCS8_encrypt")
        }
        defer { X509_SIG_free(sealed) }
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError.openSSL("BIO_new") }
        defer { BIO_free(bio) }
        try Self.check(PEM_write_bio_PKCS8(bio, sealed), "PEM_write_bio_PKCS8")
        var data: UnsafeMutablePointer<CChar>?
        let length = n11_bio_mem_data(bio, &data)
        guard length > 0, let data else { throw CryptoError.openSSL("BIO_get_mem_data") }
        return Array(UnsafeRawBufferPointer(start: data, count: length))
    }
}
