import Foundation

/// The one JSON reader and writer of the format's documents (header, manifest, vault item
/// records). Foundation's JSONDecoder cannot be the judge of what a document means: it takes
/// duplicate keys (keeping one of them), a byte-order mark and `1.0` for an integer, which
/// other readers treat differently. This reader refuses all of that itself, so what it accepts
/// has one meaning (FORMAT.md "JSON"):
///
/// - UTF-8 without a byte-order mark; nothing but white space after the document;
/// - no repeated key in an object (compared after unescaping, so `"id"` and `"i\u0064"` clash);
/// - integers only: no fraction, exponent or leading zero, within Int64;
/// - strings without raw control characters, with valid escapes and no lone surrogates;
/// - nesting at most 16 deep.
///
/// Documents are read field by field (`object`, `array`, `string`, `integer`): there is no
/// tree in between, and no second decoder whose verdict could differ. Failures name the
/// field (`items[3].size`) and never echo a value.
public struct JSONReader {
    public static let maximumDepth = 16

    /// Why a document was refused, and where.
    public struct Failure: Error, CustomStringConvertible, Sendable, Equatable {
        public let reason: String
        /// The field, as a path (`kdf.opsLimit`, `items[2].size`); nil for the document.
        public let field: String?
        public let offset: Int

        public var description: String {
            if let field { return "field '\(field)': \(reason) (byte \(offset))" }
            return "\(reason) (byte \(offset))"
        }
    }

    private enum PathComponent { case key(String), index(Int) }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var position = 0
    private var path: [PathComponent] = []

    private init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// Reads one document: `body` reads its value, and nothing but white space may follow.
    public static func read<Result>(_ document: [UInt8], _ body: (inout JSONReader) throws -> Result) throws(Failure) -> Result {
        do {
            return try document.withUnsafeBufferPointer { buffer in
                var reader = JSONReader(bytes: buffer)
                if buffer.count >= 3, buffer[0] == 0xEF, buffer[1] == 0xBB, buffer[2] == 0xBF {
                    throw reader.failure("a byte-order mark before the document")
                }
                let result = try body(&reader)
                reader.skipSpace()
                guard reader.position == buffer.count else { throw reader.failure("data after the JSON document") }
                return result
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            // The documents' readers throw nothing else; keep the guarantee of one error type.
            throw Failure(reason: "\(error)", field: nil, offset: 0)
        }
    }

    // MARK: values

    /// An object: `field` is called with each key (unescaped) and must read that key's value.
    /// A key repeated in the same object is refused before `field` sees it twice.
    public mutating func object(_ field: (String, inout JSONReader) throws -> Void) throws {
        try enter()
        defer { path.removeLast() }
        try expect(UInt8(ascii: "{"), "expected an object")
        skipSpace()
        if take(UInt8(ascii: "}")) { return }
        // Objects in the format have at most ten keys: a linear search beats hashing.
        var seen: [String] = []
        seen.reserveCapacity(12)
        repeat {
            skipSpace()
            let key = try rawString(what: "expected a key")
            guard !seen.contains(key) else { throw failure("the key '\(key)' appears twice") }
            seen.append(key)
            skipSpace()
            try expect(UInt8(ascii: ":"), "expected ':'")
            skipSpace()
            path[path.count - 1] = .key(key)
            try field(key, &self)
            skipSpace()
        } while take(UInt8(ascii: ","))
        try expect(UInt8(ascii: "}"), "expected ',' or '}'")
    }

    /// An array: `element` reads each element.
    public mutating func array(_ element: (inout JSONReader) throws -> Void) throws {
        try enter()
        defer { path.removeLast() }
        try expect(UInt8(ascii: "["), "expected an array")
        skipSpace()
        if take(UInt8(ascii: "]")) { return }
        var index = 0
        repeat {
            skipSpace()
            path[path.count - 1] = .index(index)
            try element(&self)
            index += 1
            skipSpace()
        } while take(UInt8(ascii: ","))
        try expect(UInt8(ascii: "]"), "expected ',' or ']'")
    }

    public mutating func string() throws -> String {
        skipSpace()
        return try rawString(what: "expected a string")
    }

    /// One of `T`'s raw values, e.g. an `ItemKind`. The generic helpers are inlinable: called
    /// unspecialised from another module, they looked up type metadata at run time for every
    /// field, a fifth of the time `vault list` took to decode 100,000 records.
    @inlinable
    public mutating func string<T: RawRepresentable & CaseIterable>(_ type: T.Type) throws -> T where T.RawValue == String {
        let text = try string()
        guard let value = T(rawValue: text) else {
            throw failure("expected one of \(T.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", "))")
        }
        return value
    }

    /// A timestamp in one of FORMAT.md's two forms.
    public mutating func timestamp() throws -> Date {
        guard let date = Timestamp.parse(try string()) else {
            throw failure("expected a timestamp YYYY-MM-DDTHH:MM:SS[.sss]Z")
        }
        return date
    }

    /// An integer within Int64: no sign but `-`, no leading zero, no fraction or exponent.
    public mutating func integer() throws -> Int64 {
        skipSpace()
        let negative = take(UInt8(ascii: "-"))
        let start = position
        var magnitude: UInt64 = 0
        var overflow = false
        while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
            let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(bytes[position] - UInt8(ascii: "0")))
            overflow = overflow || o1 || o2
            magnitude = sum
            position += 1
        }
        let digits = position - start
        guard digits > 0 else { throw failure("expected an integer") }
        guard digits == 1 || bytes[start] != UInt8(ascii: "0") else { throw failure("an integer with a leading zero") }
        if position < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[position]) {
            throw failure("a number that is not an integer")
        }
        let limit = negative ? UInt64(Int64.max) + 1 : UInt64(Int64.max)
        guard !overflow, magnitude <= limit else { throw failure("an integer out of range") }
        if negative { return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude) }
        return Int64(magnitude)
    }

    /// An integer that must fit `T` (`UInt64`, `Int`).
    public mutating func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        let value = try integer()
        guard let narrowed = T(exactly: value) else { throw failure("an integer out of range") }
        return narrowed
    }

    /// Reads `null` if that is what comes next (and says so); otherwise reads nothing.
    public mutating func null() -> Bool {
        skipSpace()
        guard bytes.count - position >= 4, bytes[position] == UInt8(ascii: "n"), bytes[position + 1] == UInt8(ascii: "u"),
              bytes[position + 2] == UInt8(ascii: "l"), bytes[position + 3] == UInt8(ascii: "l") else { return false }
        position += 4
        return true
    }

    /// Reads any value under the same rules, keeping nothing (a field a reader ignores).
    public mutating func skip() throws {
        skipSpace()
        guard position < bytes.count else { throw failure("expected a value") }
        switch bytes[position] {
        case UInt8(ascii: "{"): try object { _, reader in try reader.skip() }
        case UInt8(ascii: "["): try array { reader in try reader.skip() }
        case UInt8(ascii: "\""): _ = try string()
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): guard null() else { throw failure("expected a value") }
        default: _ = try integer()
        }
    }

    // MARK: fields

    /// Stores a field's value, which must not be there already (the reader refuses repeated
    /// keys; this keeps a document reader's own bookkeeping honest too).
    @inlinable
    public func fill<T>(_ slot: inout T?, _ value: T) throws {
        guard slot == nil else { throw failure("repeated") }
        slot = value
    }

    /// A required field's value, or a failure naming it.
    @inlinable
    public func required<T>(_ value: T?, _ name: String) throws -> T {
        guard let value else { throw missing(name) }
        return value
    }

    /// The failure for a required field that is not there.
    public func missing(_ name: String) -> Failure {
        Failure(reason: "missing", field: fieldPath(appending: name), offset: position)
    }

    /// The failure for the current field.
    public func failure(_ reason: String) -> Failure {
        Failure(reason: reason, field: path.isEmpty ? nil : fieldPath(appending: nil), offset: position)
    }

    /// A field this document does not have.
    public func unknownField() -> Failure { failure("unknown field") }

    private func fieldPath(appending name: String?) -> String {
        var text = ""
        for component in path {
            switch component {
            case .key(let key): text += text.isEmpty ? key : "." + key
            case .index(let index): text += "[\(index)]"
            }
        }
        if let name { text += text.isEmpty ? name : "." + name }
        return text
    }

    // MARK: syntax

    private mutating func enter() throws {
        guard path.count < Self.maximumDepth else { throw failure("nested more than \(Self.maximumDepth) deep") }
        path.append(.key(""))
        skipSpace()
    }

    private mutating func literal(_ word: StaticString) throws {
        let text = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard bytes.count - position >= text.count, bytes[position..<(position + text.count)].elementsEqual(text) else {
            throw failure("expected a value")
        }
        position += text.count
    }

    /// A string's value: the bytes between the quotes, escapes decoded, as valid UTF-8.
    private mutating func rawString(what: String) throws -> String {
        guard take(UInt8(ascii: "\"")) else { throw failure(what) }
        let start = position
        // The common case, no escapes: one validating copy of the bytes. ASCII needs no
        // validation (and String(validating:) is generic: slow when called this often).
        var ascii = true
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeBufferPointer(rebasing: bytes[start..<position])
                let text: String
                if ascii {
                    text = String(decoding: raw, as: UTF8.self)
                } else {
                    guard let valid = String(validating: raw, as: UTF8.self) else { throw failure("a string that is not valid UTF-8") }
                    text = valid
                }
                position += 1
                return text
            }
            if byte < 0x20 { throw failure("a control character in a string") }
            if byte == UInt8(ascii: "\\") { break }
            if byte >= 0x80 { ascii = false }
            position += 1
        }
        guard position < bytes.count else { throw failure("an unterminated string") }
        var decoded = Array(bytes[start..<position])
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                guard let text = String(validating: decoded, as: UTF8.self) else { throw failure("a string that is not valid UTF-8") }
                return text
            case UInt8(ascii: "\\"):
                position += 1
                try escape(into: &decoded)
            case 0..<0x20:
                throw failure("a control character in a string")
            default:
                decoded.append(byte)
                position += 1
            }
        }
        throw failure("an unterminated string")
    }

    private mutating func escape(into out: inout [UInt8]) throws {
        guard position < bytes.count else { throw failure("an unterminated string") }
        let e = bytes[position]
        position += 1
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800..<0xDC00).contains(scalar) {
                guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")) else { throw failure("a lone surrogate in a \\u escape") }
                let low = try hex4()
                guard (0xDC00..<0xE000).contains(low) else { throw failure("a lone surrogate in a \\u escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw failure("a lone surrogate in a \\u escape") }
            out.append(contentsOf: String(Character(unicode)).utf8)
        default:
            throw failure("an unknown escape in a string")
        }
    }

    private mutating func hex4() throws -> UInt32 {
        guard bytes.count - position >= 4 else { throw failure("a bad \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("a bad \\u escape")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    private mutating func expect(_ byte: UInt8, _ what: String) throws {
        guard take(byte) else { throw failure(position < bytes.count ? what : "the document ends early") }
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    private mutating func skipSpace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }
}

/// The one writer of the format's documents: compact, keys in the order the caller gives
/// (the documents give them sorted, FORMAT.md "JSON"), strings escaped only where JSON
/// requires (`"`, `\` and control characters; `/` and non-ASCII are written as they are).
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    /// Per open object or array: whether a value was written yet (so a comma is due).
    private var started: [Bool] = []
    private var afterKey = false

    public init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    public mutating func object(_ body: (inout JSONWriter) -> Void) {
        beginValue()
        bytes.append(UInt8(ascii: "{"))
        started.append(false)
        body(&self)
        started.removeLast()
        bytes.append(UInt8(ascii: "}"))
    }

    public mutating func array(_ body: (inout JSONWriter) -> Void) {
        beginValue()
        bytes.append(UInt8(ascii: "["))
        started.append(false)
        body(&self)
        started.removeLast()
        bytes.append(UInt8(ascii: "]"))
    }

    /// The next key of the open object; its value follows.
    public mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        // Two appends, not an array literal: one array a key was 9 allocations a record
        // (`vault add` seals a record a note).
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        afterKey = true
    }

    public mutating func string(_ value: String) {
        beginValue()
        bytes.append(UInt8(ascii: "\""))
        // Nearly every string needs no escape: copied whole, not a byte at a time.
        if !value.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            bytes.append(contentsOf: value.utf8)
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), byte])
            case 0x08: bytes.append(contentsOf: Array(#"\b"#.utf8))
            case 0x0C: bytes.append(contentsOf: Array(#"\f"#.utf8))
            case 0x0A: bytes.append(contentsOf: Array(#"\n"#.utf8))
            case 0x0D: bytes.append(contentsOf: Array(#"\r"#.utf8))
            case 0x09: bytes.append(contentsOf: Array(#"\t"#.utf8))
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: Array(#"\u00"#.utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func timestamp(_ date: Date) { string(Timestamp.string(date)) }

    public mutating func integer<T: BinaryInteger>(_ value: T) {
        beginValue()
        bytes.append(contentsOf: String(value).utf8)
    }

    private mutating func beginValue() {
        if afterKey { afterKey = false } else { separate() }
    }

    private mutating func separate() {
        guard !started.isEmpty else { return }
        if started[started.count - 1] { bytes.append(UInt8(ascii: ",")) }
        started[started.count - 1] = true
    }
}
