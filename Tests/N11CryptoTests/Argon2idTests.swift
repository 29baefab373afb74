import Foundation
import Testing
import N11Crypto

@Suite("Argon2id")
struct Argon2idTests {
    struct VectorFile: Decodable {
        let vectors: [Vector]
        struct Vector: Decodable {
            let id: String
            let password_hex, salt_hex, secret_hex, ad_hex, tag_hex: String
            let t_cost: UInt64
            let m_cost_kib: UInt64
            let parallelism: Int
            let tag_len: Int
            let version: Int
            let libsodium: String
        }
    }

    /// Every vector libsodium's crypto_pwhash can express (p = 1, 16-byte salt, no secret/AD).
    /// One test, run in sequence: some vectors need 256 MiB.
    @Test("every crypto_pwhash-reproducible vector")
    func knownAnswers() throws {
        let file = try Fixtures.decode(VectorFile.self, from: "argon2id.json")
        let vectors = file.vectors.filter { $0.libsodium == "crypto_pwhash" }
        var checked = 0
        for v in vectors {
            #expect(v.parallelism == 1 && v.version == 19 && v.secret_hex.isEmpty && v.ad_hex.isEmpty, "\(v.id)")
            let password = try SecureBytes(copying: try hex(v.password_hex))
            let parameters = try Argon2Parameters(opsLimit: v.t_cost, memoryBytes: v.m_cost_kib * 1024)
            let derived = try Argon2id.deriveKey(password: password, salt: try hex(v.salt_hex),
                                                 parameters: parameters, outputLength: v.tag_len)
            #expect(derived.count == v.tag_len, "\(v.id)")
            let matches = derived.withUnsafeBytes { Array($0) } == (try hex(v.tag_hex))
            #expect(matches, "\(v.id): got \(hexString(derived.bytes)), want \(v.tag_hex)")
            checked += 1
        }
        #expect(checked == 21)
    }

    @Test("the same inputs give the same key; salt and password each change it")
    func determinism() throws {
        let parameters = try Argon2Parameters(opsLimit: 1, memoryBytes: 8 << 10)
        let salt = [UInt8](repeating: 0xA5, count: 16)
        let password = try SecureBytes(copying: Array("correct horse".utf8))
        let a = try Argon2id.deriveKey(password: password, salt: salt, parameters: parameters)
        let b = try Argon2id.deriveKey(password: password, salt: salt, parameters: parameters)
        #expect(a.count == 32)
        #expect(a.constantTimeEquals(b))
        var otherSalt = salt
        otherSalt[15] ^= 1
        #expect(!a.constantTimeEquals(try Argon2id.deriveKey(password: password, salt: otherSalt, parameters: parameters)))
        let otherPassword = try SecureBytes(copying: Array("correct horsf".utf8))
        #expect(!a.constantTimeEquals(try Argon2id.deriveKey(password: otherPassword, salt: salt, parameters: parameters)))
        let moreOps = try Argon2Parameters(opsLimit: 2, memoryBytes: 8 << 10)
        #expect(!a.constantTimeEquals(try Argon2id.deriveKey(password: password, salt: salt, parameters: moreOps)))
    }

    @Test("parameters outside the accepted bounds are refused before use")
    func parameterBounds() throws {
        let refused: [(ops: UInt64, memory: UInt64)] = [
            (0, 64 << 20),                 // no passes
            (33, 64 << 20),                // above the 32-pass ceiling
            (UInt64.max, 64 << 20),
            (2, 1 << 40),                  // 1 TiB
            (2, (1 << 30) + 1024),         // just above the 1 GiB ceiling
            (2, 1024),                     // 1 KiB, below libsodium's 8 KiB floor
            (2, 0),
        ]
        for (ops, memory) in refused {
            let error = #expect(throws: CryptoError.self, "ops \(ops), memory \(memory)") {
                _ = try Argon2Parameters(opsLimit: ops, memoryBytes: memory)
            }
            #expect(isInvalidParameter(error))
        }
        // The bounds themselves are accepted.
        let low = try Argon2Parameters(opsLimit: 1, memoryBytes: 8 << 10)
        #expect(low.opsLimit == 1 && low.memoryBytes == 8192)
        let high = try Argon2Parameters(opsLimit: 32, memoryBytes: 1 << 30)
        #expect(high.opsLimit == 32 && high.memoryBytes == 1 << 30)
    }

    @Test("named profiles: interactive (2, 64 MiB) and moderate (3, 256 MiB)")
    func profiles() throws {
        #expect(Argon2Parameters.interactive.opsLimit == 2)
        #expect(Argon2Parameters.interactive.memoryBytes == 64 * 1024 * 1024)
        #expect(Argon2Parameters.moderate.opsLimit == 3)
        #expect(Argon2Parameters.moderate.memoryBytes == 256 * 1024 * 1024)
        // Both lie inside the bounds that hostile input is checked against.
        #expect(try Argon2Parameters(opsLimit: 2, memoryBytes: 64 << 20) == .interactive)
        #expect(try Argon2Parameters(opsLimit: 3, memoryBytes: 256 << 20) == .moderate)
    }

    @Test("salt must be 16 bytes; output 16...1024 bytes")
    func inputLengths() throws {
        let parameters = try Argon2Parameters(opsLimit: 1, memoryBytes: 8 << 10)
        let password = try SecureBytes(copying: Array("pw".utf8))
        #expect(Argon2id.saltLength == 16)
        for saltLength in [0, 8, 15, 17, 32] {
            let error = #expect(throws: CryptoError.self, "salt of \(saltLength) bytes") {
                _ = try Argon2id.deriveKey(password: password, salt: [UInt8](repeating: 1, count: saltLength),
                                           parameters: parameters)
            }
            #expect(isInvalidParameter(error))
        }
        let salt = [UInt8](repeating: 1, count: 16)
        for outputLength in [0, 15, 1025] {
            let error = #expect(throws: CryptoError.self, "output of \(outputLength) bytes") {
                _ = try Argon2id.deriveKey(password: password, salt: salt, parameters: parameters, outputLength: outputLength)
            }
            #expect(isInvalidParameter(error))
        }
        #expect(try Argon2id.deriveKey(password: password, salt: salt, parameters: parameters, outputLength: 16).count == 16)
        // An empty password is a (weak) password, not a crash.
        #expect(try Argon2id.deriveKey(password: try SecureBytes(count: 0), salt: salt, parameters: parameters).count == 32)
    }
}
