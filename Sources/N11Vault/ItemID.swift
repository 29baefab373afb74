import Foundation
import N11Crypto

/// Item IDs as text and as their 16 bytes, written and read by hand: `vault add` makes one
/// and reads one back for every item, and Foundation's `UUID(uuidString:)` parses with
/// `sscanf` (3.5% of the add's thread at 20,000 notes), while the old `newItemID` went
/// through `uppercased()` and string indices (4.4%).
enum ItemID {
    private static let upperDigits = Array("0123456789ABCDEF".utf8)

    /// A new item's ID: a random (version 4) UUID in upper case, as seed 003 names items.
    /// From the CSPRNG (`SecureRandom`'s pool), like every other random value here:
    /// Foundation's `UUID()` opens, reads and closes /dev/urandom each time, three system
    /// calls per item.
    static func random() -> String {
        var bytes = SecureRandom.bytes(16)
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return text(of: bytes)
    }

    /// The 36-character upper-case form of 16 bytes (what `UUID.uuidString` gives).
    static func text(of bytes: some Collection<UInt8>) -> String {
        precondition(bytes.count == 16)
        return String(unsafeUninitializedCapacity: 36) { out in
            var at = 0
            for (index, byte) in bytes.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 { out[at] = UInt8(ascii: "-"); at += 1 }
                out[at] = upperDigits[Int(byte >> 4)]
                out[at + 1] = upperDigits[Int(byte & 15)]
                at += 2
            }
            return at
        }
    }

    static func text(of uuid: uuid_t) -> String {
        withUnsafeBytes(of: uuid) { text(of: $0) }
    }

    /// The 16 bytes of an ID in the 8-4-4-4-12 form, hex digits in either case; nil for
    /// anything else. (Foundation's `sscanf` on Linux also takes a sign, spaces or `0x` at
    /// a group's start, and ignores what follows a NUL: no ID of a vault or archive has
    /// them, `EntryName.isCanonicalID`.)
    static func bytes(of id: String) -> uuid_t? {
        id.utf8.withContiguousStorageIfAvailable(parse) ?? Array(id.utf8).withUnsafeBufferPointer(parse)
    }

    private static func parse(_ chars: UnsafeBufferPointer<UInt8>) -> uuid_t? {
        guard chars.count == 36 else { return nil }
        var out: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let parsed = withUnsafeMutableBytes(of: &out) { out -> Bool in
            var index = 0
            for at in 0..<16 {
                if at == 4 || at == 6 || at == 8 || at == 10 {
                    guard chars[index] == UInt8(ascii: "-") else { return false }
                    index += 1
                }
                guard let high = digit(chars[index]), let low = digit(chars[index + 1]) else { return false }
                out[at] = high << 4 | low
                index += 2
            }
            return true
        }
        return parsed ? out : nil
    }

    private static func digit(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
