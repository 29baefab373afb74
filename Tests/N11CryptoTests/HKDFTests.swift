import Foundation
import Testing
import N11Crypto

@Suite("HKDF-SHA256")
struct HKDFTests {
    struct VectorFile: Decodable {
        let algorithm: String
        let numberOfTests: Int
        let testGroups: [Group]
        struct Group: Decodable { let tests: [Test] }
        struct Test: Decodable {
            let tcId: Int
            let comment: String
            let ikm, salt, info, okm: String
            let size: Int
            let result: String
        }
    }

    @Test("every Wycheproof HKDF-SHA256 test")
    func wycheproof() throws {
        let file = try Fixtures.decode(VectorFile.self, from: "wycheproof_hkdf_sha256_test.json")
        #expect(file.algorithm == "HKDF-SHA-256")
        var checked = 0, valid = 0, invalid = 0
        for test in file.testGroups.flatMap(\.tests) {
            let ikm = try SecureBytes(copying: try hex(test.ikm))
            let salt = try hex(test.salt), info = try hex(test.info)
            let context = Comment(rawValue: "tcId \(test.tcId) (\(test.comment)), size \(test.size)")
            switch test.result {
            case "valid":
                let okm = try HKDF.deriveKey(inputKey: ikm, salt: salt, info: info, outputLength: test.size)
                #expect(okm.count == test.size, context)
                #expect(hexString(okm.bytes) == test.okm, context)
                valid += 1
            case "invalid":
                let error = #expect(throws: CryptoError.self, context) {
                    _ = try HKDF.deriveKey(inputKey: ikm, salt: salt, info: info, outputLength: test.size)
                }
                #expect(isInvalidParameter(error), context)
                invalid += 1
            default:
                Issue.record("unexpected result '\(test.result)'; \(context)")
            }
            checked += 1
        }
        #expect(checked == file.numberOfTests)
        #expect(checked == 86 && valid == 83 && invalid == 3)
    }

    @Test("output length must be 1...8160 bytes")
    func outputBounds() throws {
        let ikm = try SecureBytes(randomCount: 32)
        for length in [0, -1, 255 * 32 + 1] {
            let error = #expect(throws: CryptoError.self, "length \(length)") {
                _ = try HKDF.deriveKey(inputKey: ikm, salt: [], info: [], outputLength: length)
            }
            #expect(isInvalidParameter(error))
        }
        #expect(try HKDF.deriveKey(inputKey: ikm, salt: [], info: [], outputLength: 1).count == 1)
        #expect(try HKDF.deriveKey(inputKey: ikm, salt: [], info: [], outputLength: 8160).count == 8160)
    }

    @Test("info separates keys; a shorter output is a prefix of a longer one")
    func domainSeparation() throws {
        let ikm = try SecureBytes(randomCount: 32)
        let salt = SecureRandom.bytes(16)
        let a = try HKDF.deriveKey(inputKey: ikm, salt: salt, info: Array("entry key".utf8))
        let b = try HKDF.deriveKey(inputKey: ikm, salt: salt, info: Array("manifest key".utf8))
        #expect(!a.constantTimeEquals(b))
        let long = try HKDF.deriveKey(inputKey: ikm, salt: salt, info: Array("entry key".utf8), outputLength: 64)
        #expect(Array(long.bytes.prefix(32)) == a.bytes)
    }
}
