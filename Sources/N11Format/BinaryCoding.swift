/// The binary encoding of version 3's manifest pages and root (DESIGN.md §8.2): fixed-size
/// byte strings and unsigned LEB128 integers. Strict like the format's JSON: a reader refuses
/// a non-minimal LEB128 (a trailing 0x80…00 group), one past 63 bits, a value past its bound
/// and bytes after the end, so two readers never decode one page two ways.
public struct BinaryWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public mutating func append(_ raw: [UInt8]) { bytes += raw }

    /// A string's UTF-8 bytes, as they are (no length).
    public mutating func append(utf8 text: String) { bytes.append(contentsOf: text.utf8) }

    /// Empties it, keeping its capacity (a writer reused for many small values).
    public mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    public mutating func byte(_ value: UInt8) { bytes.append(value) }

    /// Unsigned LEB128: seven bits a byte, low first, the high bit set on all but the last.
    public mutating func integer(_ value: UInt64) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    public mutating func integer(_ value: Int64) {
        precondition(value >= 0, "the format's integers are unsigned")
        integer(UInt64(value))
    }

    public mutating func integer(_ value: Int) { integer(Int64(value)) }

    /// A signed value, zigzag-encoded (0, −1, 1, −2, … as 0, 1, 2, 3, …), then LEB128.
    public mutating func signedInteger(_ value: Int64) {
        integer(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }
}

public struct BinaryReader {
    private let bytes: [UInt8]
    private var offset = 0
    /// What the bytes are, for messages ("page 3").
    private let what: String

    public init(_ bytes: [UInt8], what: String) {
        self.bytes = bytes
        self.what = what
    }

    /// Reading from `offset` on: a record of a page read before (`ParsedPage`).
    init(_ bytes: [UInt8], at offset: Int, what: String) {
        precondition((0...bytes.count).contains(offset))
        self.init(bytes, what: what)
        self.offset = offset
    }

    /// How far it has read.
    var position: Int { offset }

    public var isAtEnd: Bool { offset == bytes.count }

    func failure(_ why: String) -> FormatError { .invalidManifest("\(what): \(why) at byte \(offset)") }

    public mutating func bytes(_ count: Int) throws(FormatError) -> [UInt8] {
        guard count <= bytes.count - offset else { throw failure("it ends early") }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    public mutating func byte() throws(FormatError) -> UInt8 { try bytes(1)[0] }

    /// An unsigned LEB128 of at most 63 bits in its shortest form, within `bound`.
    public mutating func integer(atMost bound: UInt64, _ field: String) throws(FormatError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let byte = try self.byte()
            let bits = UInt64(byte & 0x7F)
            // Nine groups of seven bits: 63 bits, so every value fits an Int64.
            guard shift < 63 else { throw failure("\(field) is longer than 63 bits") }
            value |= bits << shift
            if byte & 0x80 == 0 {
                guard byte != 0 || shift == 0 else { throw failure("\(field) is not in its shortest form") }
                break
            }
            shift += 7
        }
        guard value <= bound else { throw failure("\(field) \(value) is above \(bound)") }
        return value
    }

    /// A zigzag-encoded signed value (see `BinaryWriter.signedInteger`) within `range`.
    public mutating func signedInteger(in range: ClosedRange<Int64>, _ field: String) throws(FormatError) -> Int64 {
        let raw = try integer(atMost: UInt64(Int64.max), field)
        let value = Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
        guard range.contains(value) else { throw failure("\(field) \(value) is outside \(range.lowerBound)…\(range.upperBound)") }
        return value
    }

    public mutating func int(atMost bound: Int, _ field: String) throws(FormatError) -> Int {
        Int(try integer(atMost: UInt64(bound), field))
    }

    public mutating func int64(atMost bound: Int64, _ field: String) throws(FormatError) -> Int64 {
        Int64(try integer(atMost: UInt64(bound), field))
    }

    /// Refuses anything after the last field.
    public func end() throws(FormatError) {
        guard isAtEnd else { throw failure("\(bytes.count - offset) bytes follow the end") }
    }
}
