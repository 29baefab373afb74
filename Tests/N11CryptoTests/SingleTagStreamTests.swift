import Foundation
import Testing
import N11Crypto

private let mebibyte = 1 << 20
private let oddReads = [1, 5000, mebibyte + 3, 12, 777_777]

enum Algorithm: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case aes256GCM, chacha20Poly1305
    var value: AEADAlgorithm { self == .aes256GCM ? .aes256GCM : .chacha20Poly1305 }
    var testDescription: String { rawValue }
}

/// Seals `plaintext` as nonce ‖ ciphertext ‖ tag and returns the bytes.
private func sealSingle(_ algorithm: Algorithm, key: SecureBytes, aad: [UInt8], _ plaintext: [UInt8])
    throws -> (bytes: [UInt8], result: SingleTagStream.Sealed) {
    let sink = MemorySink()
    let result = try SingleTagStream.seal(algorithm.value, key: key, aad: aad,
                                          from: MemorySource(plaintext, readSizes: oddReads), to: sink)
    return (sink.bytes, result)
}

private func openSingle(_ algorithm: Algorithm, key: SecureBytes, aad: [UInt8], _ sealed: [UInt8]) throws -> [UInt8] {
    let sink = CollectingPlaintextSink()
    let length = try SingleTagStream.open(algorithm.value, key: key, aad: aad,
                                          from: MemorySource(sealed, readSizes: oddReads), into: sink)
    #expect(length == Int64(sink.bytes.count))
    return sink.bytes
}

@Suite("SingleTagStream (nonce ‖ ciphertext ‖ tag, streamed)")
struct SingleTagStreamTests {
    static let sizes = [0, 1, mebibyte - 1, mebibyte, mebibyte + 17, 3 * mebibyte]
    let aad: [UInt8] = Array("vault item 0001".utf8)

    @Test("round trip; layout is nonce(12) ‖ ct ‖ tag(16) and opens with one-shot AEAD",
          arguments: sizes, Algorithm.allCases)
    func roundTrip(size: Int, algorithm: Algorithm) throws {
        let key = try SecureBytes(randomCount: 32)
        let plaintext = patternBytes(size, seed: UInt64(size) ^ 0x5eed)
        let (sealed, result) = try sealSingle(algorithm, key: key, aad: aad, plaintext)

        #expect(sealed.count == 12 + size + 16)
        #expect(SingleTagStream.overhead == 28)
        #expect(result.plaintextLength == Int64(size))
        #expect(result.tag == Array(sealed.suffix(16)))

        // Seed 003's format: [12-byte nonce][ciphertext][16-byte tag], one AEAD message.
        let oneShot = try AEAD.open(algorithm.value, key: key, nonce: Array(sealed.prefix(12)),
                                    ciphertext: Array(sealed[12..<(sealed.count - 16)]),
                                    tag: Array(sealed.suffix(16)), aad: aad)
        #expect(oneShot == plaintext)

        #expect(try openSingle(algorithm, key: key, aad: aad, sealed) == plaintext)
        #expect(try SingleTagStream.verify(algorithm.value, key: key, aad: aad,
                                           from: MemorySource(sealed)) == Int64(size))
    }

    @Test("a one-shot AEAD message nonce ‖ ct ‖ tag opens as a stream", arguments: Algorithm.allCases)
    func opensOneShotFormat(algorithm: Algorithm) throws {
        let key = try SecureBytes(randomCount: 32)
        let nonce = SecureRandom.bytes(12)
        let plaintext = patternBytes(mebibyte + 100)
        let sealed = try AEAD.seal(algorithm.value, key: key, nonce: nonce, plaintext: plaintext, aad: aad)
        #expect(try openSingle(algorithm, key: key, aad: aad, nonce + sealed.ciphertext + sealed.tag) == plaintext)
    }

    @Test("every message gets a fresh nonce", arguments: Algorithm.allCases)
    func freshNonce(algorithm: Algorithm) throws {
        let key = try SecureBytes(randomCount: 32)
        let a = try sealSingle(algorithm, key: key, aad: [], [1, 2, 3]).bytes
        let b = try sealSingle(algorithm, key: key, aad: [], [1, 2, 3]).bytes
        #expect(Array(a.prefix(12)) != Array(b.prefix(12)))
        #expect(a != b)
    }
}

@Suite("SingleTagStream tampering")
struct SingleTagStreamTamperTests {
    let aad: [UInt8] = Array("vault item 0001".utf8)

    /// Both `open` and `verify` must refuse `sealed` with `error`.
    private func expectRefused(_ algorithm: Algorithm, key: SecureBytes, aad: [UInt8], _ sealed: [UInt8],
                               _ error: CryptoError, _ comment: Comment,
                               sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(throws: error, "open: \(comment)", sourceLocation: sourceLocation) {
            _ = try openSingle(algorithm, key: key, aad: aad, sealed)
        }
        #expect(throws: error, "verify: \(comment)", sourceLocation: sourceLocation) {
            try SingleTagStream.verify(algorithm.value, key: key, aad: aad, from: MemorySource(sealed, readSizes: oddReads))
        }
    }

    @Test("flipped bytes, truncation, extra bytes, wrong key and wrong AAD are refused",
          arguments: Algorithm.allCases)
    func tampering(algorithm: Algorithm) throws {
        let key = try SecureBytes(randomCount: 32)
        let plaintext = patternBytes(mebibyte + 17)   // spans two read buffers
        let sealed = try sealSingle(algorithm, key: key, aad: aad, plaintext).bytes
        let n = sealed.count

        for index in [0, 11, 12, 13, 12 + mebibyte / 2, 12 + mebibyte - 1, 12 + mebibyte, n - 17, n - 16, n - 1] {
            var tampered = sealed
            tampered[index] ^= 0x20
            expectRefused(algorithm, key: key, aad: aad, tampered, .authenticationFailed, "byte \(index) of \(n) flipped")
        }
        expectRefused(algorithm, key: key, aad: aad, Array(sealed.dropLast()), .authenticationFailed, "last byte cut")
        expectRefused(algorithm, key: key, aad: aad, Array(sealed.dropLast(16)), .authenticationFailed, "tag cut off")
        expectRefused(algorithm, key: key, aad: aad, Array(sealed.prefix(12 + mebibyte)), .authenticationFailed,
                      "cut at the buffer boundary")
        expectRefused(algorithm, key: key, aad: aad, Array(sealed.prefix(28)), .authenticationFailed, "nonce and 16 bytes")
        expectRefused(algorithm, key: key, aad: aad, Array(sealed.prefix(27)), .truncated, "shorter than nonce + tag")
        expectRefused(algorithm, key: key, aad: aad, Array(sealed.prefix(11)), .truncated, "part of a nonce")
        expectRefused(algorithm, key: key, aad: aad, [], .truncated, "empty")
        expectRefused(algorithm, key: key, aad: aad, sealed + [0], .authenticationFailed, "one byte appended")
        expectRefused(algorithm, key: key, aad: aad, sealed + sealed, .authenticationFailed, "appended to itself")

        expectRefused(algorithm, key: try SecureBytes(randomCount: 32), aad: aad, sealed, .authenticationFailed, "wrong key")
        expectRefused(algorithm, key: key, aad: [], sealed, .authenticationFailed, "AAD missing")
        expectRefused(algorithm, key: key, aad: Array("vault item 0002".utf8), sealed, .authenticationFailed, "other AAD")
        // The same bytes under the other algorithm do not open either.
        let other: Algorithm = algorithm == .aes256GCM ? .chacha20Poly1305 : .aes256GCM
        expectRefused(other, key: key, aad: aad, sealed, .authenticationFailed, "other algorithm")

        // The untouched message still opens (the checks above are not failing for another reason).
        #expect(try openSingle(algorithm, key: key, aad: aad, sealed) == plaintext)
    }

    @Test("an empty plaintext is still authenticated", arguments: Algorithm.allCases)
    func emptyMessage(algorithm: Algorithm) throws {
        let key = try SecureBytes(randomCount: 32)
        let sealed = try sealSingle(algorithm, key: key, aad: aad, []).bytes
        #expect(sealed.count == 28)
        var tampered = sealed
        tampered[20] ^= 1
        expectRefused(algorithm, key: key, aad: aad, tampered, .authenticationFailed, "tag flipped")
        expectRefused(algorithm, key: key, aad: [], sealed, .authenticationFailed, "AAD missing")
        #expect(try openSingle(algorithm, key: key, aad: aad, sealed) == [])
    }
}
