import Foundation
import Testing
import N11Crypto

@Suite("Password generator and strength estimate (seed 002)")
struct PasswordGeneratorTests {
    static let lower = Set("abcdefghijklmnopqrstuvwxyz".utf8)
    static let upper = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
    static let digits = Set("0123456789".utf8)
    static let symbols = Set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~".utf8)

    static func expectedPool(_ classes: CharacterClasses) -> Set<UInt8> {
        var pool = Set<UInt8>()
        if classes.contains(.lowercase) { pool.formUnion(lower) }
        if classes.contains(.uppercase) { pool.formUnion(upper) }
        if classes.contains(.digits) { pool.formUnion(digits) }
        if classes.contains(.symbols) { pool.formUnion(symbols) }
        return pool
    }

    /// Every non-empty combination of the four classes (what the --no-* flags can select).
    static let combinations: [CharacterClasses] = (1..<16).map { CharacterClasses(rawValue: UInt8($0)) }

    @Test("the pool is exactly the union of the selected classes, for every combination of flags")
    func poolsPerCombination() throws {
        #expect(Self.symbols.count == 32)
        for classes in Self.combinations {
            let generator = try PasswordGenerator(classes: classes)
            let expected = Self.expectedPool(classes)
            #expect(Set(generator.pool) == expected, "\(classes)")
            #expect(generator.pool.count == expected.count, "no duplicates in \(classes)")
        }
        #expect(try PasswordGenerator().pool.count == 94)
        #expect(try PasswordGenerator(classes: [.lowercase, .digits]).pool.count == 36)
        #expect(try PasswordGenerator(classes: .symbols).pool.count == 32)
    }

    @Test("entropy is length × log2(pool size) and the default is 24 characters of all classes")
    func entropyMath() throws {
        let standard = try PasswordGenerator()
        #expect(standard.length == 24)
        #expect(abs(standard.entropy.bits - 24 * log2(94.0)) < 1e-9)
        #expect(standard.entropy.description == "157 bits (Very Strong)")
        let pin = try PasswordGenerator(length: 6, classes: .digits)
        #expect(abs(pin.entropy.bits - 6 * log2(10.0)) < 1e-9)
        #expect(pin.entropy.description == "19 bits (Weak)")
        let hex = try PasswordGenerator(length: 16, classes: [.lowercase, .uppercase])
        #expect(hex.entropy.bits == 16 * log2(52.0))
        #expect(try PasswordGenerator(length: 1, classes: .digits).generate().count == 1)
        #expect(try PasswordGenerator(length: PasswordGenerator.maximumLength).generate().count == PasswordGenerator.maximumLength)
    }

    @Test("labels change exactly at 40, 60 and 100 bits", arguments: [
        (0.0, PasswordStrength.weak), (39.9, .weak), (40.0, .moderate), (59.9, .moderate),
        (60.0, .strong), (99.9, .strong), (100.0, .veryStrong), (1000.0, .veryStrong),
    ])
    func labels(bits: Double, strength: PasswordStrength) {
        #expect(PasswordStrength(bits: bits) == strength)
    }

    @Test("the printed figure is rounded down, so it never contradicts its label")
    func printedFigure() {
        // 39.86 bits is Weak; "40 bits (Weak)" would read as a contradiction.
        let almost = PasswordEntropy(length: 6, poolSize: 100)
        #expect(almost.bits > 39.8 && almost.bits < 40)
        #expect(almost.description == "39 bits (Weak)")
        #expect(PasswordEntropy(length: 20, poolSize: 4).description == "40 bits (Moderate)")
    }

    @Test("a length under 1 or over the maximum is refused", arguments: [0, -1, PasswordGenerator.maximumLength + 1])
    func refusedLengths(length: Int) {
        let error = #expect(throws: CryptoError.self) { _ = try PasswordGenerator(length: length) }
        guard case .invalidParameter(let message) = error else { Issue.record("\(String(describing: error))"); return }
        #expect(message.contains("length"))
    }

    @Test("no character class selected is refused")
    func noClasses() {
        let error = #expect(throws: CryptoError.self) { _ = try PasswordGenerator(classes: []) }
        guard case .invalidParameter(let message) = error else { Issue.record("\(String(describing: error))"); return }
        #expect(message.contains("at least one"))
    }

    @Test("each draw asks for a value below the pool size and maps it to that pool character")
    func drawsMapToPool() throws {
        let generator = try PasswordGenerator(length: 94)
        var next: UInt32 = 0
        var bounds: Set<UInt32> = []
        let password = try generator.generate { bound in
            bounds.insert(bound)
            defer { next += 1 }
            return next
        }
        #expect(bounds == [94])
        #expect(password.withUnsafeBytes { Array($0) } == generator.pool)
    }

    @Test("over many CSPRNG draws every pool character appears, in roughly equal numbers",
          arguments: [CharacterClasses.all, .digits, [.uppercase, .symbols]])
    func statisticalSanity(classes: CharacterClasses) throws {
        let generator = try PasswordGenerator(length: PasswordGenerator.maximumLength, classes: classes)
        var counts: [UInt8: Int] = [:]
        let rounds = 25   // 102,400 characters
        for _ in 0..<rounds {
            try generator.generate().withUnsafeBytes { for byte in $0 { counts[byte, default: 0] += 1 } }
        }
        #expect(Set(counts.keys) == Self.expectedPool(classes), "a character outside the pool, or one never drawn")
        // Expected n = 102,400 / pool (≥ 1,089); allowing ±40% is > 12 standard deviations,
        // so this fails only for a broken generator (a class skipped, a character favoured).
        let expected = Double(rounds * PasswordGenerator.maximumLength) / Double(generator.pool.count)
        for (byte, count) in counts {
            #expect(abs(Double(count) - expected) < 0.4 * expected, "\(UnicodeScalar(byte)) drawn \(count) times, expected ≈ \(Int(expected))")
        }
    }

    @Test("two generated passwords differ")
    func passwordsDiffer() throws {
        let generator = try PasswordGenerator()
        #expect(!(try generator.generate()).constantTimeEquals(try generator.generate()))
    }

    // MARK: estimating a chosen password

    @Test("a chosen password's pool is the union of the classes that occur in it", arguments: [
        ("password", 8, 26), ("PASSWORD", 8, 26), ("12345678", 8, 10), ("Password1", 9, 62),
        ("Password1!", 10, 95), ("correct horse battery staple", 28, 59), ("!!!!", 4, 33),
        ("pässword", 8, 26 + 96), ("日本語", 3, 96), ("tab\there", 8, 26 + 96), ("", 0, 0),
    ])
    func estimate(text: String, length: Int, pool: Int) {
        let entropy = PasswordStrengthEstimate.entropy(ofBytes: Array(text.utf8))
        #expect(entropy == PasswordEntropy(length: length, poolSize: pool), "\(text)")
    }

    @Test("the estimate reads a SecureBytes in place and labels it: 'password' is Weak, a passphrase Very Strong")
    func estimateLabels() throws {
        let weak = try SecureBytes(copying: Array("password".utf8))
        #expect(PasswordStrengthEstimate.entropy(of: weak).strength == .weak)
        let mixed = try SecureBytes(copying: Array("hunter2hunter".utf8))   // lower + digits: 13 × log2(36) ≈ 67
        #expect(PasswordStrengthEstimate.entropy(of: mixed).bits == 13 * log2(36.0))
        #expect(PasswordStrengthEstimate.entropy(of: mixed).strength == .strong)
        let phrase = try SecureBytes(copying: Array("correct horse battery staple".utf8))
        #expect(PasswordStrengthEstimate.entropy(of: phrase).strength == .veryStrong)
        // Bytes that are not UTF-8 still count: a stray continuation byte adds nothing,
        // a lone lead byte is one character of the "other" class.
        #expect(PasswordStrengthEstimate.entropy(ofBytes: [0xC3, UInt8(ascii: "a")]) == PasswordEntropy(length: 2, poolSize: 26 + 96))
        #expect(PasswordStrengthEstimate.entropy(ofBytes: [0x80, 0x80]) == PasswordEntropy(length: 0, poolSize: 0))
    }
}
