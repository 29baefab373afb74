import Foundation
import Testing
import N11Crypto

/// PBKDF2-HMAC-SHA256, AES-256-CBC and AES-256-CTR (Ciphio's text messages) against
/// published vectors: Wycheproof (its PBKDF2 file opens with RFC 7914 §11's) and
/// NIST SP 800-38A F.5.5.
@Suite("PBKDF2, AES-CBC and AES-CTR known-answer vectors")
struct CiphioCipherVectorTests {
    struct PBKDF2File: Decodable {
        struct Group: Decodable { let tests: [Test] }
        struct Test: Decodable { let tcId: Int; let comment: String; let password: String; let salt: String
            let iterationCount: Int; let dkLen: Int; let dk: String; let result: String }
        let testGroups: [Group]
    }

    @Test("every Wycheproof PBKDF2-HMAC-SHA256 case, RFC 7914 §11's among them")
    func pbkdf2() throws {
        let file = try Fixtures.decode(PBKDF2File.self, from: "wycheproof_pbkdf2_hmacsha256_test.json")
        var checked = 0, rfc = 0
        for test in file.testGroups.flatMap(\.tests) {
            let key = try PBKDF2.deriveKey(password: try SecureBytes(copying: try hex(test.password)), salt: try hex(test.salt),
                                           iterations: test.iterationCount, length: test.dkLen)
            #expect(hexString(key.bytes) == test.dk, "tcId \(test.tcId) (\(test.comment))")
            #expect(test.result == "valid")
            checked += 1
            if test.comment.contains("RFC 7914") { rfc += 1 }
        }
        #expect(checked == 60 && rfc >= 1)
    }

    struct CBCFile: Decodable {
        struct Group: Decodable { let keySize: Int; let tests: [Test] }
        struct Test: Decodable { let tcId: Int; let comment: String; let key: String; let iv: String; let msg: String
            let ct: String; let result: String }
        let testGroups: [Group]
    }

    @Test("Wycheproof AES-CBC-PKCS5 with 256-bit keys: valid ones encrypt and decrypt exactly, bad padding is refused; other key sizes are refused")
    func cbc() throws {
        let file = try Fixtures.decode(CBCFile.self, from: "wycheproof_aes_cbc_pkcs5_test.json")
        var valid = 0, invalid = 0
        for group in file.testGroups {
            for test in group.tests {
                let key = try SecureBytes(copying: try hex(test.key))
                let iv = try hex(test.iv), msg = try hex(test.msg), ct = try hex(test.ct)
                let context = Comment(rawValue: "tcId \(test.tcId) (\(test.comment))")
                guard group.keySize == 256 else {
                    #expect(throws: CryptoError.self, context) { _ = try UnauthenticatedCipher.aes256CBC.decrypt(ct, key: key, iv: iv) }
                    continue
                }
                switch test.result {
                case "valid":
                    #expect(try UnauthenticatedCipher.aes256CBC.encrypt(msg, key: key, iv: iv) == ct, context)
                    #expect(try UnauthenticatedCipher.aes256CBC.decrypt(ct, key: key, iv: iv).bytes == msg, context)
                    valid += 1
                default:
                    #expect(throws: CryptoError.authenticationFailed, context) { _ = try UnauthenticatedCipher.aes256CBC.decrypt(ct, key: key, iv: iv) }
                    invalid += 1
                }
            }
        }
        #expect(valid == 24 && invalid == 48)
    }

    @Test("NIST SP 800-38A F.5.5 CTR-AES256.Encrypt, and its decryption")
    func ctr() throws {
        let key = try SecureBytes(copying: try hex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4"))
        let counter = try hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
        let plain = try hex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710")
        let cipher = try hex("601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c52b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6")
        #expect(try UnauthenticatedCipher.aes256CTR.encrypt(plain, key: key, iv: counter) == cipher)
        #expect(try UnauthenticatedCipher.aes256CTR.decrypt(cipher, key: key, iv: counter).bytes == plain)
        // A stream cipher: any prefix works, and a changed byte changes only that byte.
        #expect(try UnauthenticatedCipher.aes256CTR.encrypt(Array(plain.prefix(7)), key: key, iv: counter) == Array(cipher.prefix(7)))
    }
}
