import Foundation
import Testing
@testable import N11Crypto

/// One-shot AEAD against Wycheproof and RFC 8439: a valid vector must seal to exactly
/// ct‖tag and open back to msg; an invalid one must be refused.
@Suite("AEAD known-answer vectors")
struct AEADVectorTests {
    /// What happened to one vector: checked against its expected result, or refused up front
    /// because its nonce length is outside what the API accepts.
    enum Outcome { case checked, nonceRefused }

    /// Checks one Wycheproof AEAD test, recording an issue for any mismatch.
    private func check(_ algorithm: AEADAlgorithm, _ test: WycheproofAEADFile.Test, ivSize: Int,
                       supportsNonce: (Int) -> Bool) throws -> Outcome {
        let key = try SecureBytes(copying: try hex(test.key))
        let iv = try hex(test.iv), aad = try hex(test.aad), msg = try hex(test.msg)
        let ct = try hex(test.ct), tag = try hex(test.tag)
        let context = Comment(rawValue: "tcId \(test.tcId) (\(test.comment)) iv \(ivSize) bits, \(test.result)")
        #expect(iv.count * 8 == ivSize, context)

        guard supportsNonce(iv.count) else {
            // An unsupported nonce must be refused by both directions as a parameter error,
            // before any crypto runs.
            let sealError = #expect(throws: CryptoError.self, context) {
                _ = try AEAD.seal(algorithm, key: key, nonce: iv, plaintext: msg, aad: aad)
            }
            #expect(isInvalidParameter(sealError), "\(context): \(String(describing: sealError))")
            let openError = #expect(throws: CryptoError.self, context) {
                _ = try AEAD.open(algorithm, key: key, nonce: iv, ciphertext: ct, tag: tag, aad: aad)
            }
            #expect(isInvalidParameter(openError), "\(context): \(String(describing: openError))")
            return .nonceRefused
        }

        switch test.result {
        case "valid":
            let sealed = try AEAD.seal(algorithm, key: key, nonce: iv, plaintext: msg, aad: aad)
            #expect(hexString(sealed.ciphertext) == test.ct, context)
            #expect(hexString(sealed.tag) == test.tag, context)
            let opened = try AEAD.open(algorithm, key: key, nonce: iv, ciphertext: ct, tag: tag, aad: aad)
            #expect(opened == msg, context)
        case "invalid":
            #expect(throws: CryptoError.authenticationFailed, context) {
                _ = try AEAD.open(algorithm, key: key, nonce: iv, ciphertext: ct, tag: tag, aad: aad)
            }
        default:
            Issue.record("unexpected result '\(test.result)'; \(context)")
        }
        return .checked
    }

    /// Runs `check`, recording (not propagating) an unexpected error so one bad vector does
    /// not hide the rest.
    private func checkRecording(_ algorithm: AEADAlgorithm, _ test: WycheproofAEADFile.Test, ivSize: Int,
                                supportsNonce: (Int) -> Bool) -> Outcome? {
        do {
            return try check(algorithm, test, ivSize: ivSize, supportsNonce: supportsNonce)
        } catch {
            Issue.record("tcId \(test.tcId) (\(test.comment)), iv \(ivSize) bits: unexpected error \(error)")
            return nil
        }
    }

    /// OpenSSL 3 takes GCM IVs of 1...128 bytes (GCM_IV_MAX_SIZE); a 0-byte IV is insecure
    /// (CVE-2017-7822). Longer IVs are legal GCM that this API may refuse, but only cleanly.
    static let supportedGCMNonceLengths = 1...128

    @Test("Wycheproof AES-GCM, every 256-bit-key test")
    func wycheproofAESGCM() throws {
        let file = try Fixtures.decode(WycheproofAEADFile.self, from: "wycheproof_aes_gcm_test.json")
        #expect(file.algorithm == "AES-GCM")
        #expect(file.testGroups.reduce(0) { $0 + $1.tests.count } == file.numberOfTests)

        let groups = file.testGroups.filter { $0.keySize == 256 }
        let expected = groups.reduce(0) { $0 + $1.tests.count }
        var checked = 0, refused: [String] = []
        for group in groups {
            #expect(group.tagSize == 128)
            for test in group.tests {
                let outcome = checkRecording(.aes256GCM, test, ivSize: group.ivSize,
                                             supportsNonce: { Self.supportedGCMNonceLengths.contains($0) })
                if outcome == .nonceRefused { refused.append("\(group.ivSize):\(test.result)") }
                checked += 1
            }
        }
        #expect(checked == expected)
        #expect(checked == 105)   // the fixture's keySize-256 count (README: 316 in all)
        // Refused: the two 0-bit-IV vectors (invalid) and the one 2056-bit-IV vector (valid GCM).
        #expect(refused.sorted() == ["0:invalid", "0:invalid", "2056:valid"])
    }

    @Test("Wycheproof ChaCha20-Poly1305, every test; non-96-bit nonces refused")
    func wycheproofChaCha20Poly1305() throws {
        let file = try Fixtures.decode(WycheproofAEADFile.self, from: "wycheproof_chacha20_poly1305_test.json")
        #expect(file.algorithm == "CHACHA20-POLY1305")
        var checked = 0, refused = 0
        for group in file.testGroups {
            #expect(group.keySize == 256 && group.tagSize == 128)
            for test in group.tests {
                let outcome = checkRecording(.chacha20Poly1305, test, ivSize: group.ivSize,
                                             supportsNonce: { $0 == 12 })
                if outcome == .nonceRefused {
                    refused += 1
                    #expect(test.result == "invalid" && test.flags.contains("InvalidNonceSize"), "tcId \(test.tcId)")
                }
                checked += 1
            }
        }
        #expect(checked == file.numberOfTests)
        #expect(checked == 325)
        #expect(refused == 9)   // the InvalidNonceSize groups
    }

    @Test("AEADOpener: one context per key, reused across every Wycheproof ChaCha20-Poly1305 message under it, failures included")
    func openerReusesContext() throws {
        let file = try Fixtures.decode(WycheproofAEADFile.self, from: "wycheproof_chacha20_poly1305_test.json")
        let tests = file.testGroups.filter { $0.ivSize == 96 }.flatMap(\.tests)
        var openers: [String: AEADOpener] = [:]
        var valid = 0, invalid = 0
        // Twice over, so every context is reused after both outcomes.
        for test in tests + tests {
            let opener = try openers[test.key] ?? AEADOpener(.chacha20Poly1305, key: SecureBytes(copying: try hex(test.key)))
            openers[test.key] = opener
            let opened = opener.open(try hex(test.iv) + hex(test.ct) + hex(test.tag), aad: try hex(test.aad))
            if test.result == "valid" {
                let message = try hex(test.msg)
                #expect(opened == message, "tcId \(test.tcId)")
                valid += 1
            } else {
                #expect(opened == nil, "tcId \(test.tcId)")
                invalid += 1
            }
        }
        #expect(openers.count > 10 && valid > 100 && invalid > 100, "\(openers.count) keys, \(valid) valid, \(invalid) invalid")
        #expect(openers.values.first?.open([1, 2, 3], aad: []) == nil, "shorter than a nonce and a tag")
    }

    @Test("AEADSealer: one context per key, reused across every valid Wycheproof 96-bit-nonce message under it, seals to exactly nonce‖ct‖tag; with its own nonces, each message opens and no two are alike",
          arguments: [(AEADAlgorithm.aes256GCM, "wycheproof_aes_gcm_test.json"), (.chacha20Poly1305, "wycheproof_chacha20_poly1305_test.json")])
    func sealerReusesContext(algorithm: AEADAlgorithm, fixture: String) throws {
        let file = try Fixtures.decode(WycheproofAEADFile.self, from: fixture)
        let tests = file.testGroups.filter { $0.ivSize == 96 && $0.keySize == 256 }.flatMap(\.tests).filter { $0.result == "valid" }
        var sealers: [String: AEADSealer] = [:]
        // Twice over, so every context is reused.
        for test in tests + tests {
            let sealer = try sealers[test.key] ?? AEADSealer(algorithm, key: SecureBytes(copying: try hex(test.key)))
            sealers[test.key] = sealer
            let nonce = try hex(test.iv)
            #expect(try sealer.seal(try hex(test.msg), nonce: nonce, aad: try hex(test.aad)) == nonce + hex(test.ct) + hex(test.tag),
                    "tcId \(test.tcId)")
        }
        #expect(sealers.count > 10, "\(sealers.count) keys")
        let key = try SecureBytes(randomCount: 32)
        let sealer = try AEADSealer(algorithm, key: key), opener = try AEADOpener(algorithm, key: key)
        let message = Array("the same record, sealed twice".utf8), aad = Array("id".utf8)
        let first = try sealer.seal(message, aad: aad), second = try sealer.seal(message, aad: aad)
        #expect(first != second && first.prefix(12) != second.prefix(12), "a fresh nonce each time")
        #expect(opener.open(first, aad: aad) == message && opener.open(second, aad: aad) == message)
        #expect(opener.open(first, aad: Array("another id".utf8)) == nil)
    }

    struct RFC8439File: Decodable {
        let vectors: [Vector]
        struct Vector: Decodable {
            let id, key, nonce, aad, plaintext, ciphertext, tag, result: String
        }
    }

    @Test("RFC 8439 §2.8.2 and A.5 ChaCha20-Poly1305 vectors")
    func rfc8439() throws {
        let file = try Fixtures.decode(RFC8439File.self, from: "rfc8439_aead.json")
        #expect(file.vectors.map(\.id).sorted() == ["rfc8439-2.8.2", "rfc8439-A.5"].sorted())
        for v in file.vectors {
            let key = try SecureBytes(copying: try hex(v.key))
            let nonce = try hex(v.nonce), aad = try hex(v.aad)
            let plaintext = try hex(v.plaintext), ciphertext = try hex(v.ciphertext), tag = try hex(v.tag)
            let sealed = try AEAD.seal(.chacha20Poly1305, key: key, nonce: nonce, plaintext: plaintext, aad: aad)
            #expect(sealed.ciphertext == ciphertext, "\(v.id)")
            #expect(sealed.tag == tag, "\(v.id)")
            #expect(try AEAD.open(.chacha20Poly1305, key: key, nonce: nonce, ciphertext: ciphertext,
                                  tag: tag, aad: aad) == plaintext, "\(v.id)")
            var badTag = tag
            badTag[15] ^= 0x80
            #expect(throws: CryptoError.authenticationFailed, "\(v.id)") {
                _ = try AEAD.open(.chacha20Poly1305, key: key, nonce: nonce, ciphertext: ciphertext, tag: badTag, aad: aad)
            }
        }
        #expect(file.vectors.count == 2)
    }
}

/// The one-shot API's own rules (lengths, AAD binding, key wrapping layout).
@Suite("AEAD one-shot API")
struct AEADAPITests {
    @Test("keys must be 32 bytes; tags must be 16 bytes", arguments: [AEADAlgorithm.aes256GCM, .chacha20Poly1305])
    func lengths(algorithm: AEADAlgorithm) throws {
        let nonce = [UInt8](repeating: 1, count: 12)
        for badLength in [0, 16, 31, 33] {
            let shortKey = try SecureBytes(count: badLength)
            let error = #expect(throws: CryptoError.self) {
                _ = try AEAD.seal(algorithm, key: shortKey, nonce: nonce, plaintext: [1, 2, 3])
            }
            #expect(isInvalidParameter(error), "key of \(badLength) bytes")
        }
        let k = try key()
        let sealed = try AEAD.seal(algorithm, key: k, nonce: nonce, plaintext: [1, 2, 3])
        #expect(sealed.tag.count == 16)
        for truncatedTag in [[], Array(sealed.tag.prefix(15)), Array(sealed.tag.prefix(12)), sealed.tag + [0]] {
            #expect(throws: CryptoError.authenticationFailed, "tag of \(truncatedTag.count) bytes") {
                _ = try AEAD.open(algorithm, key: k, nonce: nonce, ciphertext: sealed.ciphertext, tag: truncatedTag)
            }
        }
    }

    @Test("nonce lengths: AES-GCM 1...128 bytes, ChaCha20-Poly1305 exactly 12; others are parameter errors")
    func nonceLengths() throws {
        let k = try key()
        let accepted: [(AEADAlgorithm, Int)] = [(.aes256GCM, 1), (.aes256GCM, 12), (.aes256GCM, 16), (.aes256GCM, 128),
                                                (.chacha20Poly1305, 12)]
        for (algorithm, length) in accepted {
            let nonce = [UInt8](repeating: 3, count: length)
            let sealed = try AEAD.seal(algorithm, key: k, nonce: nonce, plaintext: [1, 2, 3])
            #expect(try AEAD.open(algorithm, key: k, nonce: nonce, ciphertext: sealed.ciphertext, tag: sealed.tag) == [1, 2, 3])
        }
        let refused: [(AEADAlgorithm, Int)] = [(.aes256GCM, 0), (.aes256GCM, 129), (.aes256GCM, 257), (.aes256GCM, 1024),
                                               (.aes256GCM, 1025), (.chacha20Poly1305, 0), (.chacha20Poly1305, 8),
                                               (.chacha20Poly1305, 11), (.chacha20Poly1305, 13), (.chacha20Poly1305, 24)]
        for (algorithm, length) in refused {
            let error = #expect(throws: CryptoError.self, "\(algorithm), \(length)-byte nonce") {
                _ = try AEAD.seal(algorithm, key: k, nonce: [UInt8](repeating: 3, count: length), plaintext: [1, 2, 3])
            }
            #expect(isInvalidParameter(error), "\(algorithm), \(length)-byte nonce: got \(String(describing: error))")
        }
    }

    @Test("AAD is authenticated", arguments: [AEADAlgorithm.aes256GCM, .chacha20Poly1305])
    func aadBinding(algorithm: AEADAlgorithm) throws {
        let k = try key(), nonce = SecureRandom.bytes(12), aad: [UInt8] = Array("entry 7".utf8)
        let plaintext = patternBytes(100)
        let sealed = try AEAD.seal(algorithm, key: k, nonce: nonce, plaintext: plaintext, aad: aad)
        #expect(try AEAD.open(algorithm, key: k, nonce: nonce, ciphertext: sealed.ciphertext,
                              tag: sealed.tag, aad: aad) == plaintext)
        for wrongAAD in [[], Array("entry 8".utf8), aad + [0]] {
            #expect(throws: CryptoError.authenticationFailed) {
                _ = try AEAD.open(algorithm, key: k, nonce: nonce, ciphertext: sealed.ciphertext,
                                  tag: sealed.tag, aad: wrongAAD)
            }
        }
    }

    @Test("sealSecret is nonce(12)‖ct‖tag(16) and openSecret reverses it", arguments: [AEADAlgorithm.aes256GCM, .chacha20Poly1305])
    func keyWrapping(algorithm: AEADAlgorithm) throws {
        let wrappingKey = try key(7)
        let secret = try SecureBytes(randomCount: 32)
        let aad: [UInt8] = Array("key record v1".utf8)
        let sealed = try AEAD.sealSecret(algorithm, key: wrappingKey, secret: secret, aad: aad)
        #expect(sealed.count == 12 + 32 + 16)

        // The layout is the documented one: it opens with the one-shot API.
        let opened = try AEAD.open(algorithm, key: wrappingKey, nonce: Array(sealed[0..<12]),
                                   ciphertext: Array(sealed[12..<44]), tag: Array(sealed[44...]), aad: aad)
        #expect(opened == secret.bytes)
        #expect(try AEAD.openSecret(algorithm, key: wrappingKey, sealed: sealed, aad: aad).constantTimeEquals(secret))

        // Fresh nonce each time.
        let again = try AEAD.sealSecret(algorithm, key: wrappingKey, secret: secret, aad: aad)
        #expect(Array(again[0..<12]) != Array(sealed[0..<12]))

        for index in [0, 11, 12, 43, 44, sealed.count - 1] {
            var tampered = sealed
            tampered[index] ^= 1
            #expect(throws: CryptoError.authenticationFailed, "byte \(index) flipped") {
                _ = try AEAD.openSecret(algorithm, key: wrappingKey, sealed: tampered, aad: aad)
            }
        }
        #expect(throws: CryptoError.authenticationFailed) {
            _ = try AEAD.openSecret(algorithm, key: wrappingKey, sealed: sealed, aad: [])
        }
        #expect(throws: CryptoError.authenticationFailed) {
            _ = try AEAD.openSecret(algorithm, key: try key(8), sealed: sealed, aad: aad)
        }
        for shortLength in [0, 27] {
            #expect(throws: CryptoError.authenticationFailed, "\(shortLength) bytes") {
                _ = try AEAD.openSecret(algorithm, key: wrappingKey, sealed: Array(sealed.prefix(shortLength)), aad: aad)
            }
        }
    }
}
