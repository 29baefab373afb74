/// Rejects JSON that parsers disagree about, before it is decoded (FORMAT.md §2, §6): a byte
/// order mark, duplicate keys in an object (Foundation keeps the first, others the last),
/// numbers with a fraction or exponent (every number in the format is an integer), nesting
/// deeper than 16, and anything after the document. Only the syntax is checked here.
enum StrictJSONValidator {
    static let maximumDepth = 16

    struct Invalid: Error { let reason: String }

    /// nil if `bytes` is acceptable, else why not.
    static func problem(in bytes: [UInt8]) -> String? {
        var parser = Parser(bytes: bytes)
        do {
            parser.skipSpace()
            try parser.value(depth: 0)
            parser.skipSpace()
            guard parser.position == bytes.count else { throw Invalid(reason: "data after the JSON document") }
            return nil
        } catch let error as Invalid {
            return "JSON \(error.reason) at byte \(parser.position)"
        } catch {
            return "malformed JSON"
        }
    }

    private struct Parser {
        let bytes: [UInt8]
        var position = 0

        mutating func skipSpace() {
            while position < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[position]) { position += 1 }
        }

        func peek() -> UInt8? { position < bytes.count ? bytes[position] : nil }

        mutating func expect(_ byte: UInt8) throws {
            guard peek() == byte else { throw Invalid(reason: "expected '\(Character(Unicode.Scalar(byte)))'") }
            position += 1
        }

        mutating func value(depth: Int) throws {
            guard depth <= StrictJSONValidator.maximumDepth else { throw Invalid(reason: "nested too deeply") }
            switch peek() {
            case UInt8(ascii: "{"): try object(depth: depth)
            case UInt8(ascii: "["): try array(depth: depth)
            case UInt8(ascii: "\""): _ = try string()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            default: try integer()
            }
        }

        mutating func object(depth: Int) throws {
            try expect(UInt8(ascii: "{"))
            var keys = Set<[UInt8]>()
            skipSpace()
            if peek() == UInt8(ascii: "}") { position += 1; return }
            while true {
                skipSpace()
                let key = try Self.unescaped(try string())
                guard keys.insert(key).inserted else { throw Invalid(reason: "duplicate key") }
                skipSpace()
                try expect(UInt8(ascii: ":"))
                skipSpace()
                try value(depth: depth + 1)
                skipSpace()
                if peek() == UInt8(ascii: ",") { position += 1; continue }
                try expect(UInt8(ascii: "}"))
                return
            }
        }

        mutating func array(depth: Int) throws {
            try expect(UInt8(ascii: "["))
            skipSpace()
            if peek() == UInt8(ascii: "]") { position += 1; return }
            while true {
                skipSpace()
                try value(depth: depth + 1)
                skipSpace()
                if peek() == UInt8(ascii: ",") { position += 1; continue }
                try expect(UInt8(ascii: "]"))
                return
            }
        }

        /// The raw bytes between the quotes, escapes as written (see `unescaped`).
        mutating func string() throws -> [UInt8] {
            try expect(UInt8(ascii: "\""))
            let start = position
            while let b = peek() {
                if b == UInt8(ascii: "\"") {
                    let content = Array(bytes[start..<position])
                    position += 1
                    return content
                }
                if b < 0x20 { throw Invalid(reason: "control character in a string") }
                position += b == UInt8(ascii: "\\") ? 2 : 1
            }
            throw Invalid(reason: "unterminated string")
        }

        /// A string's value as UTF-8, so `"id"` and `"i\u0064"` count as the same key.
        static func unescaped(_ raw: [UInt8]) throws -> [UInt8] {
            var out: [UInt8] = []
            var i = 0
            func hex4(_ at: Int) throws -> UInt32 {
                guard at + 4 <= raw.count, let v = UInt32(String(decoding: raw[at..<(at + 4)], as: UTF8.self), radix: 16) else {
                    throw Invalid(reason: "bad \\u escape")
                }
                return v
            }
            while i < raw.count {
                guard raw[i] == UInt8(ascii: "\\") else { out.append(raw[i]); i += 1; continue }
                guard i + 1 < raw.count else { throw Invalid(reason: "bad escape") }
                let e = raw[i + 1]
                i += 2
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4(i)
                    i += 4
                    if (0xD800..<0xDC00).contains(scalar), i + 6 <= raw.count, raw[i] == UInt8(ascii: "\\"), raw[i + 1] == UInt8(ascii: "u") {
                        let low = try hex4(i + 2)
                        if (0xDC00..<0xE000).contains(low) {
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                            i += 6
                        }
                    }
                    guard let s = Unicode.Scalar(scalar) else { throw Invalid(reason: "bad \\u escape") }
                    out.append(contentsOf: Array(String(Character(s)).utf8))
                default: throw Invalid(reason: "bad escape")
                }
            }
            return out
        }

        mutating func literal(_ word: String) throws {
            for b in word.utf8 { try expect(b) }
        }

        mutating func integer() throws {
            if peek() == UInt8(ascii: "-") { position += 1 }
            let start = position
            while let b = peek(), b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") { position += 1 }
            guard position > start else { throw Invalid(reason: "unexpected character") }
            guard bytes[start] != UInt8(ascii: "0") || position - start == 1 else { throw Invalid(reason: "leading zero") }
            if let b = peek(), b == UInt8(ascii: ".") || b == UInt8(ascii: "e") || b == UInt8(ascii: "E") {
                throw Invalid(reason: "a number that is not an integer")
            }
        }
    }
}
