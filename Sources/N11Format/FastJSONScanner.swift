/// A scanner for the common shape of the JSON this tool writes (metadata records, manifests):
/// objects and arrays of strings without escapes and of integers. `JSONDecoder` spends about
/// 15 µs on each record or manifest item (generic metadata look-ups, boxing, retain/release),
/// most of what opening a 20,000-item vault or archive cost; this takes about one.
///
/// It is a fast path, never the only path: every method returns nil or false for anything it
/// is not sure about — an escape in a string, a control character, a fraction or exponent,
/// `true`/`false`, bytes after the document — and callers then decode the same bytes with
/// `JSONDecoder`, so anything it accepts decodes to what `JSONDecoder` would give and
/// everything else keeps `JSONDecoder`'s verdict and message.
public struct FastJSONScanner {
    public enum Value: Equatable, Sendable {
        case string(String)
        case integer(Int64)
        case null

        public var string: String? { if case .string(let s) = self { return s } else { return nil } }
        public var integer: Int64? { if case .integer(let n) = self { return n } else { return nil } }
    }

    /// An object key's bytes (never escaped), valid only inside the `object` callback.
    public struct Key {
        fileprivate let bytes: UnsafeBufferPointer<UInt8>
        public func `is`(_ name: StaticString) -> Bool {
            bytes.count == name.utf8CodeUnitCount && bytes.elementsEqual(UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        }
        public var string: String? { String(validating: bytes, as: UTF8.self) }
    }

    /// Stores `value` in an empty `slot`. False for a repeated field or a value that is
    /// missing or of the wrong type, which makes the caller decline the document.
    public static func fill<T>(_ slot: inout T?, _ value: T?) -> Bool {
        guard slot == nil, let value else { return false }
        slot = value
        return true
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var position = 0

    private init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// Runs `body` over `document`; `body` reads exactly one value and the scan succeeds only
    /// if nothing but white space follows it.
    public static func scan<Result>(_ document: [UInt8], _ body: (inout FastJSONScanner) -> Result?) -> Result? {
        document.withUnsafeBufferPointer { buffer in
            var scanner = FastJSONScanner(bytes: buffer)
            guard let result = body(&scanner) else { return nil }
            scanner.skipSpace()
            return scanner.position == buffer.count ? result : nil
        }
    }

    /// An object: `field` is called with each key and must read that key's value from the
    /// scanner (with `value()`, `array(_:)` or `object(_:)`), returning false to give up.
    public mutating func object(_ field: (Key, inout FastJSONScanner) -> Bool) -> Bool {
        skipSpace()
        guard take(UInt8(ascii: "{")) else { return false }
        skipSpace()
        if take(UInt8(ascii: "}")) { return true }
        repeat {
            skipSpace()
            guard let key = rawString() else { return false }
            skipSpace()
            guard take(UInt8(ascii: ":")), field(Key(bytes: key), &self) else { return false }
            skipSpace()
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "}"))
    }

    /// An array: `element` reads each element from the scanner, returning false to give up.
    public mutating func array(_ element: (inout FastJSONScanner) -> Bool) -> Bool {
        skipSpace()
        guard take(UInt8(ascii: "[")) else { return false }
        skipSpace()
        if take(UInt8(ascii: "]")) { return true }
        repeat {
            guard element(&self) else { return false }
            skipSpace()
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "]"))
    }

    /// A string without escapes, an integer that fits Int64, or null.
    public mutating func value() -> Value? {
        skipSpace()
        guard position < bytes.count else { return nil }
        switch bytes[position] {
        case UInt8(ascii: "\""): return rawString().flatMap { String(validating: $0, as: UTF8.self) }.map(Value.string)
        case UInt8(ascii: "n"): return literalNull() ? .null : nil
        default: return integer().map(Value.integer)
        }
    }

    /// The bytes between the quotes of a string without escapes or control characters.
    private mutating func rawString() -> UnsafeBufferPointer<UInt8>? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = position
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                position += 1
                return UnsafeBufferPointer(rebasing: bytes[start..<(position - 1)])
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
            position += 1
        }
        return nil
    }

    /// A JSON integer (no fraction or exponent, no leading zero) that fits in Int64.
    private mutating func integer() -> Int64? {
        let negative = take(UInt8(ascii: "-"))
        let start = position
        var magnitude: UInt64 = 0
        while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
            let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(bytes[position] - UInt8(ascii: "0")))
            guard !o1, !o2 else { return nil }
            magnitude = sum
            position += 1
        }
        let digits = position - start
        guard digits > 0, digits == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        if position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
            default: break
            }
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    private mutating func literalNull() -> Bool {
        guard bytes.count - position >= 4, bytes[position + 1] == UInt8(ascii: "u"),
              bytes[position + 2] == UInt8(ascii: "l"), bytes[position + 3] == UInt8(ascii: "l") else { return false }
        position += 4
        return true
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    fileprivate mutating func skipSpace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }
}
