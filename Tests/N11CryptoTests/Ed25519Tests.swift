import Foundation
import Testing
import N11Crypto

/// Ed25519 verification against Wycheproof's 151 cases (valid signatures, and every kind of
/// malleable, truncated, padded or out-of-range one that must be refused), and signing.
@Suite("Ed25519: Wycheproof vectors, signing, and what is refused")
struct Ed25519Tests {
    struct File: Decodable {
        struct Group: Decodable {
            struct Key: Decodable { let pk: String }
            let publicKey: Key
            let tests: [Test]
        }
        struct Test: Decodable {
            let tcId: Int
            let msg: String
            let sig: String
            let result: String
        }
        let testGroups: [Group]
    }

    @Test("every Wycheproof case: valid ones verify, invalid ones are refused")
    func wycheproof() throws {
        let file = try Fixtures.decode(File.self, from: "wycheproof_ed25519_test.json")
        var valid = 0, invalid = 0
        for group in file.testGroups {
            let key = try Ed25519PublicKey(bytes: try hex(group.publicKey.pk))
            for test in group.tests {
                let verifies = key.verifies(try hex(test.sig), of: try hex(test.msg))
                #expect(verifies == (test.result == "valid"), "tcId \(test.tcId)")
                if test.result == "valid" { valid += 1 } else { invalid += 1 }
            }
        }
        #expect(valid == 88 && invalid == 63, "all 151 cases were read")
    }

    @Test("a signature of a new key verifies for that message only, under that key only")
    func signAndVerify() throws {
        let key = try Ed25519SigningKey.generate()
        let message = Array("n11archive/v3/header-signature".utf8) + [0] + Array("{\"version\":3}".utf8)
        let signature = try key.sign(message)
        #expect(signature.count == 64 && key.publicKey.verifies(signature, of: message))
        #expect(try key.sign(message) == signature, "deterministic")
        #expect(!key.publicKey.verifies(signature, of: message + [0]))
        #expect(!(try Ed25519SigningKey.generate()).publicKey.verifies(signature, of: message))
        var flipped = signature
        flipped[40] ^= 1
        #expect(!key.publicKey.verifies(flipped, of: message))
        #expect(!key.publicKey.verifies(Array(signature.dropLast()), of: message))
        #expect(throws: CryptoError.self) { _ = try Ed25519PublicKey(bytes: [UInt8](repeating: 1, count: 31)) }
        // A key of small order with R = that point and S = 0 passes RFC 8032's equation for
        // any message; libsodium refuses such keys (FORMAT.md §10.3).
        let smallOrder = try Ed25519PublicKey(bytes: [1] + [UInt8](repeating: 0, count: 31))
        #expect(!smallOrder.verifies([1] + [UInt8](repeating: 0, count: 63), of: message))
    }
}
