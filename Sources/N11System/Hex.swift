/// Lowercase hex, for IDs, digests and tags in metadata, manifests and headers. Written out
/// by hand rather than with `String(format:)`, which cost 6% of creating an archive of
/// 20,000 notes (a tag is compared as hex for every item).
extension Array where Element == UInt8 {
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
