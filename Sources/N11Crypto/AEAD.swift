internal import CLibCrypto

/// The AEADs the product uses, all from OpenSSL's EVP interface (several GB/s per core).
/// AES-128-GCM only for Apple's ECIES (FileLock), which uses a 16-byte key on P-256.
public enum AEADAlgorithm: Sendable {
    case aes256GCM
    case aes128GCM
    case chacha20Poly1305

    public static let keyLength = 32

    public var keyByteCount: Int { self == .aes128GCM ? 16 : 32 }
    public static let tagLength = 16
    public static let standardNonceLength = 12

    var cipher: OpaquePointer? {
        switch self {
        case .aes256GCM: return Self.fetchedAES256GCM
        case .aes128GCM: return Self.fetchedAES128GCM
        case .chacha20Poly1305: return Self.fetchedChaCha20Poly1305
        }
    }

    // Fetched once. OpenSSL 3 turns the legacy EVP_aes_256_gcm() into a provider lookup
    // under a lock on every EVP_CipherInit_ex, which made setting up a cipher context cost
    // more than sealing a 2 KiB note. Fetched ciphers are immutable and shared between
    // threads; they are never freed.
    nonisolated(unsafe) private static let fetchedAES256GCM = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)
    nonisolated(unsafe) private static let fetchedAES128GCM = EVP_CIPHER_fetch(nil, "AES-128-GCM", nil)
    nonisolated(unsafe) private static let fetchedChaCha20Poly1305 = EVP_CIPHER_fetch(nil, "ChaCha20-Poly1305", nil)

    /// AES-GCM accepts IVs of 1…128 bytes (GHASH derives J0 from long ones; OpenSSL 3 stops
    /// at 128); ChaCha20-Poly1305
    /// (RFC 8439) takes exactly 96 bits.
    func checkNonce(_ nonce: [UInt8]) throws(CryptoError) {
        switch self {
        case .aes256GCM, .aes128GCM:
            guard !nonce.isEmpty, nonce.count <= 128 else { throw .invalidParameter("AES-GCM nonce of \(nonce.count) bytes") }
        case .chacha20Poly1305:
            guard nonce.count == Self.standardNonceLength else { throw .invalidParameter("ChaCha20-Poly1305 nonce of \(nonce.count) bytes") }
        }
    }
}

/// One EVP_CIPHER_CTX, owned by this object and freed in deinit. Every OpenSSL call of the
/// AEADs goes through here, return codes checked in one place. Internal: callers use the
/// one-shot `AEAD` functions or the streaming types, which decide when plaintext is released.
final class AEADContext {
    private let context: OpaquePointer
    let algorithm: AEADAlgorithm
    let encrypting: Bool

    init(_ algorithm: AEADAlgorithm, key: SecureBytes, encrypting: Bool) throws(CryptoError) {
        guard key.count == algorithm.keyByteCount else { throw .invalidParameter("AEAD key of \(key.count) bytes") }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.openSSL("EVP_CIPHER_CTX_new") }
        context = ctx
        self.algorithm = algorithm
        self.encrypting = encrypting
        try check(EVP_CipherInit_ex(ctx, algorithm.cipher, nil, nil, nil, encrypting ? 1 : 0), "EVP_CipherInit_ex")
        try key.withUnsafeBytes { (raw) throws(CryptoError) in
            try check(EVP_CipherInit_ex(ctx, nil, nil, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), nil, -1),
                      "EVP_CipherInit_ex(key)")
        }
    }

    deinit { EVP_CIPHER_CTX_free(context) }   // also cleanses the expanded key schedule

    private func check(_ rc: Int32, _ what: String) throws(CryptoError) {
        guard rc == 1 else {
            throw CryptoError.openSSL(what)
        }
    }

    /// Starts a new message under the same key: only the nonce changes (cheap per chunk).
    func start(nonce: [UInt8], aad: [UInt8] = []) throws(CryptoError) {
        try algorithm.checkNonce(nonce)
        try check(EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_IVLEN, Int32(nonce.count), nil), "set IV length")
        try nonce.withUnsafeBufferPointer { (iv) throws(CryptoError) in
            try check(EVP_CipherInit_ex(context, nil, nil, nil, iv.baseAddress, -1), "EVP_CipherInit_ex(iv)")
        }
        if !aad.isEmpty {
            var outLength: Int32 = 0
            try aad.withUnsafeBufferPointer { (a) throws(CryptoError) in
                try check(EVP_CipherUpdate(context, nil, &outLength, a.baseAddress, Int32(a.count)), "AAD")
            }
        }
    }

    /// Transforms `count` bytes of `input` from `inputOffset` into `output` at `outputOffset`.
    /// Stream ciphers: output length equals input length.
    func update(_ input: [UInt8], inputOffset: Int = 0, count: Int,
                into output: inout [UInt8], outputOffset: Int = 0) throws(CryptoError) {
        precondition(inputOffset + count <= input.count && outputOffset + count <= output.count)
        var done = 0
        while done < count {
            // EVP lengths are Int32; feed at most 1 GiB per call.
            let piece = min(count - done, 1 << 30)
            var outLength: Int32 = 0
            let rc = input.withUnsafeBufferPointer { src in
                output.withUnsafeMutableBufferPointer { dst in
                    EVP_CipherUpdate(context, dst.baseAddress! + outputOffset + done, &outLength,
                                     src.baseAddress! + inputOffset + done, Int32(piece))
                }
            }
            try check(rc, "EVP_CipherUpdate")
            guard Int(outLength) == piece else { throw CryptoError.openSSL("EVP_CipherUpdate length") }
            done += piece
        }
    }

    /// Ends an encryption and returns the tag.
    func finishSealing() throws(CryptoError) -> [UInt8] {
        precondition(encrypting)
        var scratch = [UInt8](repeating: 0, count: 32)
        var outLength: Int32 = 0
        try check(EVP_CipherFinal_ex(context, &scratch, &outLength), "EVP_CipherFinal_ex")
        var tag = [UInt8](repeating: 0, count: AEADAlgorithm.tagLength)
        try check(EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(tag.count), &tag), "get tag")
        return tag
    }

    /// Ends a decryption; true only if `tag` verifies (OpenSSL compares in constant time).
    func finishOpening(tag: [UInt8]) -> Bool {
        precondition(!encrypting)
        guard tag.count == AEADAlgorithm.tagLength else { return false }
        var tagCopy = tag
        guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(tagCopy.count), &tagCopy) == 1 else {
            ERR_clear_error()
            return false
        }
        var scratch = [UInt8](repeating: 0, count: 32)
        var outLength: Int32 = 0
        let ok = EVP_CipherFinal_ex(context, &scratch, &outLength) == 1
        if !ok { ERR_clear_error() }
        return ok
    }
}

/// Opens many small messages under one key, `nonce ‖ ciphertext ‖ tag` each (a vault's
/// item records), through one cipher context: a new context per message cost a cipher fetch
/// and key setup, more than opening a 200-byte record. One per thread: it is not shared.
public final class AEADOpener {
    private let context: AEADContext

    public init(_ algorithm: AEADAlgorithm, key: SecureBytes) throws(CryptoError) {
        context = try AEADContext(algorithm, key: key, encrypting: false)
    }

    /// The plaintext only if the tag verifies; nil otherwise (also for a message too short
    /// to hold a nonce and a tag).
    public func open(_ sealed: [UInt8], aad: [UInt8]) -> [UInt8]? {
        let n = AEADAlgorithm.standardNonceLength, t = AEADAlgorithm.tagLength
        guard sealed.count >= n + t else { return nil }
        let length = sealed.count - n - t
        var plaintext = [UInt8].scratch(count: length)
        do {
            try context.start(nonce: Array(sealed[0..<n]), aad: aad)
            try context.update(sealed, inputOffset: n, count: length, into: &plaintext)
        } catch {
            plaintext.wipe()
            return nil
        }
        guard context.finishOpening(tag: Array(sealed[(n + length)...])) else {
            plaintext.wipe()
            return nil
        }
        return plaintext
    }
}

/// Seals many small messages under one key into `nonce ‖ ciphertext ‖ tag`, each under a
/// fresh random nonce, through one cipher context: `vault add` seals a metadata record a
/// note, and a context made and keyed for each was a fifth of that.
/// One per thread: it is not shared.
public final class AEADSealer {
    private let context: AEADContext

    public init(_ algorithm: AEADAlgorithm, key: SecureBytes) throws(CryptoError) {
        context = try AEADContext(algorithm, key: key, encrypting: true)
    }

    public func seal(_ plaintext: [UInt8], aad: [UInt8]) throws(CryptoError) -> [UInt8] {
        try seal(plaintext, nonce: SecureRandom.bytes(AEADAlgorithm.standardNonceLength), aad: aad)
    }

    /// With a given nonce: for the test vectors only (a nonce must never repeat under a key).
    func seal(_ plaintext: [UInt8], nonce: [UInt8], aad: [UInt8]) throws(CryptoError) -> [UInt8] {
        try context.start(nonce: nonce, aad: aad)
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count)
        try context.update(plaintext, count: plaintext.count, into: &ciphertext)
        return nonce + ciphertext + (try context.finishSealing())
    }
}

/// One-shot AEAD for messages that fit in memory (metadata records, key wraps, vectors).
public enum AEAD {
    public static func seal(_ algorithm: AEADAlgorithm, key: SecureBytes, nonce: [UInt8],
                            plaintext: [UInt8], aad: [UInt8] = []) throws(CryptoError) -> (ciphertext: [UInt8], tag: [UInt8]) {
        let context = try AEADContext(algorithm, key: key, encrypting: true)
        try context.start(nonce: nonce, aad: aad)
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count)
        try context.update(plaintext, count: plaintext.count, into: &ciphertext)
        return (ciphertext, try context.finishSealing())
    }

    /// Returns the plaintext only if the tag verifies; otherwise the scratch output is wiped
    /// and `authenticationFailed` is thrown.
    public static func open(_ algorithm: AEADAlgorithm, key: SecureBytes, nonce: [UInt8],
                            ciphertext: [UInt8], tag: [UInt8], aad: [UInt8] = []) throws(CryptoError) -> [UInt8] {
        let context = try AEADContext(algorithm, key: key, encrypting: false)
        try context.start(nonce: nonce, aad: aad)
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count)
        try context.update(ciphertext, count: ciphertext.count, into: &plaintext)
        guard context.finishOpening(tag: tag) else {
            plaintext.wipe()
            throw .authenticationFailed
        }
        return plaintext
    }

    /// Seals a secret (a key) into `nonce ‖ ciphertext ‖ tag`, for key wrapping.
    public static func sealSecret(_ algorithm: AEADAlgorithm, key: SecureBytes, secret: SecureBytes,
                                  aad: [UInt8]) throws(CryptoError) -> [UInt8] {
        let nonce = SecureRandom.bytes(AEADAlgorithm.standardNonceLength)
        var plain = secret.withUnsafeBytes { Array($0) }
        defer { plain.wipe() }
        let sealed = try seal(algorithm, key: key, nonce: nonce, plaintext: plain, aad: aad)
        return nonce + sealed.ciphertext + sealed.tag
    }

    /// Opens `nonce ‖ ciphertext ‖ tag` made by `sealSecret` straight into locked memory.
    public static func openSecret(_ algorithm: AEADAlgorithm, key: SecureBytes, sealed: [UInt8],
                                  aad: [UInt8]) throws(CryptoError) -> SecureBytes {
        let n = AEADAlgorithm.standardNonceLength, t = AEADAlgorithm.tagLength
        guard sealed.count >= n + t else { throw .authenticationFailed }
        var plain = try open(algorithm, key: key, nonce: Array(sealed[0..<n]),
                             ciphertext: Array(sealed[n..<(sealed.count - t)]),
                             tag: Array(sealed[(sealed.count - t)...]), aad: aad)
        defer { plain.wipe() }
        return try SecureBytes(copying: plain)
    }
}

extension Array where Element == UInt8 {
    /// Overwrites the bytes with zeros in a way the optimiser keeps.
    public mutating func wipe() {
        wipe(prefix: count)
    }

    /// Overwrites the first `length` bytes: the part of a streaming buffer that was used.
    /// Wiping whole 64 KiB chunk buffers after every 2 KiB note was 3% of a verify.
    public mutating func wipe(prefix length: Int) {
        withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { OPENSSL_cleanse(base, Swift.min(length, raw.count)) }
        }
    }

    /// A buffer whose bytes are not set, for streaming buffers that are always written before
    /// they are read: zeroing three 64 KiB buffers per item cost more than sealing a note.
    public static func scratch(count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { _, initialized in initialized = count }
    }
}

/// One AEAD message of any length under one key and nonce, fed piece by piece (FileLock
/// packages are a single AES-256-GCM message). The caller must not act on what `update`
/// returns while opening until `finishOpening` says the tag verified.
public final class AEADStream {
    private let context: AEADContext

    public init(_ algorithm: AEADAlgorithm, key: SecureBytes, nonce: [UInt8], encrypting: Bool) throws(CryptoError) {
        context = try AEADContext(algorithm, key: key, encrypting: encrypting)
        try context.start(nonce: nonce)
    }

    /// Transforms the first `count` bytes of `input` into `output` (same length).
    public func update(_ input: [UInt8], count: Int, into output: inout [UInt8]) throws(CryptoError) {
        try context.update(input, count: count, into: &output)
    }

    public func finishSealing() throws(CryptoError) -> [UInt8] { try context.finishSealing() }

    public func finishOpening(tag: [UInt8]) -> Bool { context.finishOpening(tag: tag) }
}
