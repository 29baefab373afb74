import Foundation

/// The character classes a generated password draws from (seed 002: upper, lower, digits,
/// symbols, all on by default).
public struct CharacterClasses: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let lowercase = CharacterClasses(rawValue: 1 << 0)
    public static let uppercase = CharacterClasses(rawValue: 1 << 1)
    public static let digits = CharacterClasses(rawValue: 1 << 2)
    public static let symbols = CharacterClasses(rawValue: 1 << 3)
    public static let all: CharacterClasses = [.lowercase, .uppercase, .digits, .symbols]

    /// The characters of one class, in ASCII order. Symbols are the 32 printable ASCII
    /// punctuation characters; space is left out of generated passwords because it is lost
    /// or mangled too easily when a password is copied, pasted or written to a file.
    public static func characters(of single: CharacterClasses) -> [UInt8] {
        switch single {
        case .lowercase: return Array(UInt8(ascii: "a")...UInt8(ascii: "z"))
        case .uppercase: return Array(UInt8(ascii: "A")...UInt8(ascii: "Z"))
        case .digits: return Array(UInt8(ascii: "0")...UInt8(ascii: "9"))
        case .symbols: return Array(UInt8(0x21)...UInt8(0x7E)).filter { !isLetterOrDigit($0) }
        default: preconditionFailure("characters(of:) takes a single class")
        }
    }

    static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }
}

/// Seed 002's strength labels for an entropy figure in bits.
public enum PasswordStrength: String, Sendable, CaseIterable {
    case weak = "Weak"               // < 40 bits
    case moderate = "Moderate"       // 40 ..< 60
    case strong = "Strong"           // 60 ..< 100
    case veryStrong = "Very Strong"  // ≥ 100

    public init(bits: Double) {
        switch bits {
        case ..<40: self = .weak
        case ..<60: self = .moderate
        case ..<100: self = .strong
        default: self = .veryStrong
        }
    }
}

/// An entropy estimate: `length × log2(pool size)` (seed 002) and its label.
public struct PasswordEntropy: Sendable, Equatable, CustomStringConvertible {
    public let bits: Double
    public var strength: PasswordStrength { PasswordStrength(bits: bits) }

    public init(length: Int, poolSize: Int) {
        bits = length > 0 && poolSize > 1 ? Double(length) * log2(Double(poolSize)) : 0
    }

    /// "131 bits (Very Strong)". Rounded down, so the figure never reads as reaching a
    /// threshold (40, 60, 100) that the label says it missed.
    public var description: String { "\(Int(bits.rounded(.down))) bits (\(strength.rawValue))" }
}

/// Random passwords from the system CSPRNG (libsodium's `randombytes_uniform`, which rejects
/// out-of-range draws instead of reducing modulo the pool size, so every character of the
/// pool is equally likely).
///
/// Every character is drawn independently and uniformly from the union of the selected
/// classes. There is deliberately no "at least one of each class" rule: seed 002 does not ask
/// for one, and with it the password would no longer be uniform over pool^length, so the
/// seed's entropy formula would overstate it. Pure uniform draws keep `entropy` exact.
public struct PasswordGenerator: Sendable {
    public static let defaultLength = 24
    /// The longest password the secret readers accept (`SecureBytes.readSecret`).
    public static let maximumLength = 4096

    public let length: Int
    public let classes: CharacterClasses
    /// The characters drawn from, in ASCII order, without duplicates.
    public let pool: [UInt8]

    public init(length: Int = PasswordGenerator.defaultLength, classes: CharacterClasses = .all) throws(CryptoError) {
        guard (1...Self.maximumLength).contains(length) else {
            throw .invalidParameter("a password length must be 1 to \(Self.maximumLength), not \(length)")
        }
        guard !classes.intersection(.all).isEmpty else {
            throw .invalidParameter("every character class is disabled; keep at least one of lower, upper, digits, symbols")
        }
        self.length = length
        self.classes = classes
        pool = [CharacterClasses.lowercase, .uppercase, .digits, .symbols]
            .filter { classes.contains($0) }
            .flatMap { CharacterClasses.characters(of: $0) }
            .sorted()
    }

    /// Exact for these passwords: each is one of pool.count^length equally likely strings.
    public var entropy: PasswordEntropy { PasswordEntropy(length: length, poolSize: pool.count) }

    /// A new password in locked memory (it is a secret from the moment it exists).
    public func generate() throws(CryptoError) -> SecureBytes {
        try generate { SecureRandom.uniform(below: $0) }
    }

    /// Draws with `uniform(n)` returning a value in 0..<n; tests pass a deterministic source.
    public func generate(using uniform: (UInt32) -> UInt32) throws(CryptoError) -> SecureBytes {
        let password = try SecureBytes(count: length)
        let pool = self.pool
        let size = UInt32(pool.count)
        password.withUnsafeMutableBytes { out in
            for i in 0..<out.count { out[i] = pool[Int(uniform(size))] }
        }
        return password
    }
}

/// The strength of a password someone chose, estimated the seed's way: its length in
/// characters × log2(the size of the union of the classes that occur in it). Reads the bytes
/// in place, so the password never leaves locked memory.
///
/// Class sizes: lowercase 26, uppercase 26, digits 10, ASCII punctuation and space 33, and
/// anything else (non-ASCII letters, control characters) 96, as if drawn from the printable
/// Latin-1 range: people type accented letters and a few symbols, not random code points, so
/// counting all of Unicode would flatter such passwords. Multi-byte UTF-8 counts as one
/// character. This is a ceiling, not a measurement: "Password1!" scores like random text of
/// its length, which is why a low score is refused but a high one proves little.
public enum PasswordStrengthEstimate {
    public static let otherClassSize = 96

    public static func entropy(of password: SecureBytes) -> PasswordEntropy {
        password.withUnsafeBytes { entropy(ofBytes: $0) }
    }

    public static func entropy(ofBytes bytes: some Collection<UInt8>) -> PasswordEntropy {
        var length = 0
        var lower = false, upper = false, digit = false, symbol = false, other = false
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"): lower = true
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): upper = true
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = true
            case 0x20...0x7E: symbol = true
            case 0x80...0xBF: continue   // a UTF-8 continuation byte: part of the previous character
            default: other = true
            }
            length += 1
        }
        let pool = (lower ? 26 : 0) + (upper ? 26 : 0) + (digit ? 10 : 0) + (symbol ? 33 : 0) + (other ? otherClassSize : 0)
        return PasswordEntropy(length: length, poolSize: pool)
    }
}

/// Passphrases of words drawn uniformly and independently from the EFF large wordlist
/// (`EFFLargeWordlist`), joined by `-`: easier to type at a restore prompt than 24 random
/// symbols. Each word carries log2(7776) ≈ 12.9 bits; six give 77 bits ("Strong"), eight 103
/// ("Very Strong"). The separator is fixed, so it adds nothing, and `entropy` is exact.
public struct PassphraseGenerator: Sendable {
    public static let defaultWords = 6
    public static let maximumWords = 64
    public static let separator = UInt8(ascii: "-")

    public let words: Int

    public init(words: Int = PassphraseGenerator.defaultWords) throws(CryptoError) {
        guard (1...Self.maximumWords).contains(words) else {
            throw .invalidParameter("a passphrase has 1 to \(Self.maximumWords) words, not \(words)")
        }
        self.words = words
    }

    public var entropy: PasswordEntropy { PasswordEntropy(length: words, poolSize: EFFLargeWordlist.words.count) }

    public func generate() throws(CryptoError) -> SecureBytes {
        try generate { SecureRandom.uniform(below: $0) }
    }

    /// Draws with `uniform(n)` returning a value in 0..<n; tests pass a deterministic source.
    public func generate(using uniform: (UInt32) -> UInt32) throws(CryptoError) -> SecureBytes {
        let list = EFFLargeWordlist.words
        let chosen = (0..<words).map { _ in list[Int(uniform(UInt32(list.count)))] }
        let length = chosen.reduce(0) { $0 + $1.utf8.count } + words - 1
        let phrase = try SecureBytes(count: length)
        phrase.withUnsafeMutableBytes { out in
            var at = 0
            for (n, word) in chosen.enumerated() {
                if n > 0 { out[at] = Self.separator; at += 1 }
                for byte in word.utf8 { out[at] = byte; at += 1 }
            }
        }
        return phrase
    }
}
