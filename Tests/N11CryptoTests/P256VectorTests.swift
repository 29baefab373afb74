import Foundation
import Testing
import N11Crypto

/// P-256, ECDH, the X9.63 KDF and Apple's ECIES against published vectors
/// (Fixtures/vectors/README.md says where each file comes from).
@Suite("P-256 and Apple ECIES known-answer vectors")
struct P256VectorTests {
    // MARK: ANSI X9.63 KDF (NIST CAVP)

    struct X963File: Decodable {
        struct Group: Decodable { let keyDataLengthBits: Int; let tests: [Test] }
        struct Test: Decodable { let count: Int; let z: String; let sharedInfo: String; let keyData: String }
        let testGroups: [Group]
    }

    @Test("every NIST X9.63 KDF SHA-256 vector")
    func x963KDF() throws {
        let file = try Fixtures.decode(X963File.self, from: "ansx963_sha256.json")
        var checked = 0
        for group in file.testGroups {
            for test in group.tests {
                let out = try X963KDF.deriveKey(.sha256, sharedSecret: try SecureBytes(copying: try hex(test.z)),
                                                sharedInfo: try hex(test.sharedInfo), outputLength: group.keyDataLengthBits / 8)
                #expect(hexString(out.bytes) == test.keyData, "COUNT \(test.count)")
                checked += 1
            }
        }
        #expect(checked == 20)
    }

    // MARK: Wycheproof ECDH

    struct ECDHFile: Decodable {
        struct Group: Decodable { let encoding: String; let tests: [Test] }
        struct Test: Decodable {
            let tcId: Int; let comment: String; let flags: [String]
            let `public`: String; let `private`: String; let shared: String; let result: String
        }
        let testGroups: [Group]
    }

    /// The scalar as 32 bytes: Wycheproof writes it as a big-endian integer that may carry
    /// a leading zero byte.
    static func scalar(_ text: String) throws -> SecureBytes {
        var bytes = try hex(text)
        while bytes.count > 32, bytes.first == 0 { bytes.removeFirst() }
        return try SecureBytes(copying: [UInt8](repeating: 0, count: max(0, 32 - bytes.count)) + bytes)
    }

    /// Runs every test of a file: `valid` must give exactly `shared`, `invalid` must be
    /// refused, `acceptable` may go either way but a result must be the right one.
    func runECDH(_ name: String, publicKey: (String) throws -> P256PublicKey) throws -> [String: Int] {
        let file = try Fixtures.decode(ECDHFile.self, from: name)
        var tally: [String: Int] = [:]
        for test in file.testGroups.flatMap(\.tests) {
            let context = Comment(rawValue: "\(name) tcId \(test.tcId) (\(test.comment)) \(test.flags)")
            let outcome: Result<[UInt8], any Error> = Result {
                let key = try P256PrivateKey(scalar: try Self.scalar(test.private))
                return try key.sharedSecret(with: try publicKey(test.public)).bytes
            }
            switch (test.result, outcome) {
            case ("valid", .success(let shared)):
                #expect(hexString(shared) == test.shared, context)
            case ("valid", .failure(let error)):
                Issue.record("\(context): refused a valid case: \(error)")
            case ("invalid", .success):
                Issue.record("\(context): accepted an invalid case")
            case ("invalid", .failure(let error)):
                #expect(error is CryptoError, context)
            case ("acceptable", .success(let shared)):
                if !test.shared.isEmpty { #expect(hexString(shared) == test.shared, context) }
            case ("acceptable", .failure): break
            default: Issue.record("\(context): unknown result \(test.result)")
            }
            let verdict: String
            switch outcome { case .success: verdict = "accepted"; case .failure: verdict = "refused" }
            tally["\(test.result) \(verdict)", default: 0] += 1
        }
        return tally
    }

    @Test("every Wycheproof ECDH secp256r1 case with a SubjectPublicKeyInfo public key")
    func wycheproofECDHASN() throws {
        let tally = try runECDH("wycheproof_ecdh_secp256r1_test.json") { try P256PublicKey(subjectPublicKeyInfo: try hex($0)) }
        #expect(tally["valid accepted"] == 330)
        #expect(tally["invalid refused"] == 52)
        #expect(tally.values.reduce(0, +) == 612)
    }

    @Test("every Wycheproof ECDH secp256r1 case with a raw point (invalid curves, wrong encodings refused)")
    func wycheproofECDHPoint() throws {
        let tally = try runECDH("wycheproof_ecdh_secp256r1_ecpoint_test.json") { try P256PublicKey(x963: try hex($0)) }
        #expect(tally["valid accepted"] == 330)
        #expect(tally["invalid refused"] == 24)
        // The one acceptable case is a compressed point: only the uncompressed form is a key here.
        #expect(tally["acceptable refused"] == 1)
    }

    // MARK: Apple ECIES

    struct AppleFile: Decodable {
        struct Vector: Decodable {
            let id: String; let curve: String; let kdf_hash: String; let variable_iv: Bool
            let recipient_private_scalar_hex: String?
            let private_key_sec1_der_hex: String?
            let ciphertext_hex: String; let plaintext_hex: String; let result: String
        }
        let vectors: [Vector]
    }

    static func variant(_ vector: AppleFile.Vector) throws -> AppleECIES.Variant {
        let digests: [String: X963KDF.Digest] = ["SHA-1": .sha1, "SHA-224": .sha224, "SHA-256": .sha256,
                                                  "SHA-384": .sha384, "SHA-512": .sha512]
        return AppleECIES.Variant(digest: try #require(digests[vector.kdf_hash]), variableIV: vector.variable_iv)
    }

    @Test("Apple's si-44 known ciphertexts: every P-256 one opens to \"KNOWN PLAINTEXT\\0\"; other curves are refused as keys")
    func appleSI44() throws {
        let file = try Fixtures.decode(AppleFile.self, from: "apple_ecies_security_si44.json")
        var opened: [String] = []
        for vector in file.vectors {
            let scalar = try SecureBytes(copying: try hex(try #require(vector.recipient_private_scalar_hex)))
            guard vector.curve == "secp256r1" else {
                #expect(throws: CryptoError.self, "\(vector.id)") { _ = try P256PrivateKey(scalar: scalar) }
                continue
            }
            let key = try P256PrivateKey(scalar: scalar)
            let plain = try AppleECIES.open(try hex(vector.ciphertext_hex), with: key, variant: try Self.variant(vector))
            #expect(hexString(plain.bytes) == vector.plaintext_hex, "\(vector.id)")
            opened.append(vector.id)
        }
        #expect(opened.contains("apple-si44-secp256r1-SHA256"))
        #expect(opened.count == 5)
    }

    @Test("jedda/ecies ciphertexts made by SecKeyCreateEncryptedData: the P-256 ones open; P-384/P-521 keys are refused")
    func jedda() throws {
        let file = try Fixtures.decode(AppleFile.self, from: "apple_ecies_jedda.json")
        var opened = 0
        for vector in file.vectors {
            let der = try hex(try #require(vector.private_key_sec1_der_hex))
            guard vector.curve == "secp256r1" else {
                let error = #expect(throws: CryptoError.self, "\(vector.id)") { _ = try P256PrivateKey(sec1DER: der) }
                #expect(error?.description.contains("not P-256") == true, "\(vector.id): \(String(describing: error))")
                continue
            }
            let key = try P256PrivateKey(sec1DER: der)
            let plain = try AppleECIES.open(try hex(vector.ciphertext_hex), with: key, variant: try Self.variant(vector))
            #expect(hexString(plain.bytes) == vector.plaintext_hex, "\(vector.id)")
            opened += 1
        }
        #expect(opened == 3)
    }

    @Test("the Apple SHA-256 vector fails under the wrong variant, the wrong key, and with any byte changed")
    func appleVectorTamper() throws {
        let file = try Fixtures.decode(AppleFile.self, from: "apple_ecies_security_si44.json")
        let vector = try #require(file.vectors.first { $0.id == "apple-si44-secp256r1-SHA256" })
        let key = try P256PrivateKey(scalar: try SecureBytes(copying: try hex(try #require(vector.recipient_private_scalar_hex))))
        let ciphertext = try hex(vector.ciphertext_hex)
        #expect(throws: CryptoError.authenticationFailed) {
            _ = try AppleECIES.open(ciphertext, with: key, variant: .init(digest: .sha256, variableIV: true))
        }
        #expect(throws: CryptoError.authenticationFailed) { _ = try AppleECIES.open(ciphertext, with: try P256PrivateKey.generate()) }
        for offset in [1, 40, 64, 65, 70, ciphertext.count - 16, ciphertext.count - 1] {
            var changed = ciphertext
            changed[offset] ^= 0x01
            #expect(throws: CryptoError.authenticationFailed, "offset \(offset)") { _ = try AppleECIES.open(changed, with: key) }
        }
        #expect(throws: CryptoError.authenticationFailed) { _ = try AppleECIES.open(Array(ciphertext.dropLast()), with: key) }
        #expect(throws: CryptoError.authenticationFailed) { _ = try AppleECIES.open(Array(ciphertext.prefix(80)), with: key) }
    }

    // MARK: our own keys

    @Test("seal then open a 32-byte key; the output is point ‖ 32 bytes ‖ tag; each seal uses a new ephemeral key")
    func roundTrip() throws {
        let recipient = try P256PrivateKey.generate()
        let secret = try SecureBytes(randomCount: 32)
        let a = try AppleECIES.seal(secret, to: recipient.publicKey)
        let b = try AppleECIES.seal(secret, to: recipient.publicKey)
        #expect(a.count == 65 + 32 + 16)
        #expect(a[0] == 0x04)
        #expect(Array(a.prefix(65)) != Array(b.prefix(65)))
        #expect(try AppleECIES.open(a, with: recipient).bytes == secret.bytes)
        #expect(try AppleECIES.open(b, with: recipient).bytes == secret.bytes)
    }

    @Test("public keys: the infinity point, compressed and off-curve points and wrong lengths are refused")
    func publicKeyChecks() throws {
        let good = try P256PrivateKey.generate().publicKey.x963
        #expect(throws: CryptoError.self) { _ = try P256PublicKey(x963: [0x00]) }
        #expect(throws: CryptoError.self) { _ = try P256PublicKey(x963: Array(good.prefix(33))) }
        #expect(throws: CryptoError.self) { _ = try P256PublicKey(x963: good + [0]) }
        var offCurve = good
        offCurve[64] ^= 0x01
        #expect(throws: CryptoError.self) { _ = try P256PublicKey(x963: offCurve) }
        var hybrid = good
        hybrid[0] = 0x06
        #expect(throws: CryptoError.self) { _ = try P256PublicKey(x963: hybrid) }
        #expect(throws: CryptoError.self) { _ = try P256PrivateKey(scalar: try SecureBytes(count: 32)) }
        // The order n itself is not a scalar.
        let order = try hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")
        #expect(throws: CryptoError.self) { _ = try P256PrivateKey(scalar: try SecureBytes(copying: order)) }
    }

    @Test("SubjectPublicKeyInfo round trip, and PKCS#8 PEM under a passphrase (wrong passphrase refused)")
    func encodings() throws {
        let key = try P256PrivateKey.generate()
        let spki = key.publicKey.subjectPublicKeyInfo
        #expect(try P256PublicKey(subjectPublicKeyInfo: spki) == key.publicKey)
        #expect(throws: CryptoError.self) { _ = try P256PublicKey(subjectPublicKeyInfo: spki + [0]) }
        let passphrase = try SecureBytes(copying: Array("correct horse".utf8))
        let pem = try key.encryptedPKCS8PEM(passphrase: passphrase, iterations: 1000)
        let text = String(decoding: pem, as: UTF8.self)
        #expect(text.hasPrefix("-----BEGIN ENCRYPTED PRIVATE KEY-----\n"))
        // PBKDF2's parameters (FORMAT.md, Appendix C): OID 1.2.840.113549.1.5.12, then
        // SEQUENCE { OCTET STRING salt (16 bytes), … }.
        let body = text.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let der = [UInt8](try #require(Data(base64Encoded: body)))
        let pbkdf2: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x05, 0x0C]
        let at = try #require((0...(der.count - pbkdf2.count)).first { Array(der[$0..<($0 + pbkdf2.count)]) == pbkdf2 })
        #expect(der[at + 11] == 0x30 && der[at + 13] == 0x04 && der[at + 14] == 16, "the PBKDF2 salt is not 16 bytes")
        #expect(!P256PrivateKey.isUsablePEMPassphrase(try SecureBytes(copying: Array(repeating: 0x61, count: 1024))))
        #expect(throws: CryptoError.self) {
            _ = try key.encryptedPKCS8PEM(passphrase: try SecureBytes(copying: Array(repeating: 0x61, count: 1024)), iterations: 1000)
        }
        let back = try P256PrivateKey(pem: pem, passphrase: passphrase)
        #expect(back.scalar.bytes == key.scalar.bytes)
        #expect(throws: CryptoError.self) {
            _ = try P256PrivateKey(pem: pem, passphrase: try SecureBytes(copying: Array("wrong".utf8)))
        }
        #expect(throws: CryptoError.self) { _ = try P256PrivateKey(pem: pem, passphrase: nil) }
    }
}
