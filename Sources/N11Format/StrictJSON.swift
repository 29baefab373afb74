import Foundation

/// A coding key for any string, used to list every key an object really has, so unknown
/// fields can be rejected (JSONDecoder silently ignores them otherwise).
struct AnyKey: CodingKey {
    let stringValue: String
    init(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { nil }
}

extension Decoder {
    /// Throws unless every key of this object is in `allowed`.
    func requireOnlyKeys(_ allowed: Set<String>, in what: String) throws {
        let keys = try container(keyedBy: AnyKey.self).allKeys.map(\.stringValue)
        if let unknown = keys.first(where: { !allowed.contains($0) }) {
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "unknown field '\(unknown)' in \(what)"))
        }
    }
}

enum JSONCoding {
    static func encoder() -> JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        e.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(Timestamp.string(date))
        }
        return e
    }
    static func decoder() -> JSONDecoder {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .custom { decoder in
            let c = try decoder.singleValueContainer()
            let text = try c.decode(String.self)
            guard let date = Timestamp.parse(text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "timestamp '\(text)' is not YYYY-MM-DDTHH:MM:SS[.sss]Z"))
            }
            return date
        }
        return d
    }

    /// A readable reason from a DecodingError, without echoing data.
    static func reason(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let c): return c.debugDescription
        case DecodingError.keyNotFound(let k, _): return "missing field '\(k.stringValue)'"
        case DecodingError.typeMismatch(_, let c): return "wrong type at \(c.codingPath.map(\.stringValue).joined(separator: "."))"
        case DecodingError.valueNotFound(_, let c): return "missing value at \(c.codingPath.map(\.stringValue).joined(separator: "."))"
        default: return "malformed JSON"
        }
    }
}

extension Array where Element == UInt8 {
    /// Lowercase hex.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(count * 2)
        for b in self { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// Parses lowercase hex of exactly `length` bytes; nil otherwise.
    public init?(hex: String, length: Int) {
        let chars = Array(hex.utf8)
        guard chars.count == length * 2 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            default: return nil
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(length)
        for i in stride(from: 0, to: chars.count, by: 2) {
            guard let hi = value(chars[i]), let lo = value(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
        }
        self = out
    }
}
