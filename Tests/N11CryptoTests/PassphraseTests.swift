import Foundation
import Testing
import N11Crypto
import N11System

@Suite("Passphrases from the EFF large wordlist")
struct PassphraseTests {
    /// Fixtures/wordlists/eff_large_wordlist.txt, as the EFF publishes it.
    static let fixture = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/wordlists/eff_large_wordlist.txt")

    @Test("the embedded list is the EFF's file word for word (and that file is the published one)")
    func embeddedListIsTheEFFList() throws {
        let bytes = try [UInt8](Data(contentsOf: Self.fixture))
        #expect(try SHA256Digest.hash(bytes).hex == "addd35536511597a02fa0a9ff1e5284677b8883b83e986e43f15a3db996b903e")
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        let words = lines.map { String($0.split(separator: "\t")[1]) }
        #expect(words.count == 7776)
        #expect(EFFLargeWordlist.words == words)
        #expect(Set(words).count == 7776)
    }

    @Test("words are drawn uniformly by index and joined by '-'; entropy is words × log2(7776) with the password labels")
    func generation() throws {
        var draws: [UInt32] = [0, 7775, 1234]
        let phrase = try PassphraseGenerator(words: 3).generate { bound in
            #expect(bound == 7776)
            return draws.removeFirst()
        }
        let text = phrase.withUnsafeBytes { String(decoding: Array($0), as: UTF8.self) }
        #expect(text == "abacus-zoom-\(EFFLargeWordlist.words[1234])")
        #expect(try PassphraseGenerator(words: 6).entropy.description == "77 bits (Strong)")
        #expect(try PassphraseGenerator(words: 8).entropy.description == "103 bits (Very Strong)")
        #expect(try PassphraseGenerator(words: 3).entropy.description == "38 bits (Weak)")
        #expect(throws: CryptoError.self) { _ = try PassphraseGenerator(words: 0) }
        #expect(throws: CryptoError.self) { _ = try PassphraseGenerator(words: 65) }
        // Two real draws differ (a 77-bit collision would be a broken generator).
        let a = try PassphraseGenerator().generate().withUnsafeBytes { Array($0) }
        let b = try PassphraseGenerator().generate().withUnsafeBytes { Array($0) }
        #expect(a != b)
    }
}
