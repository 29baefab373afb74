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
