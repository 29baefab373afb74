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

    /// The version 4 UUID whose 122 free bits, read from the most significant, are the low
    /// 122 bits of `bits`: they fill every bit but the four of the version (byte 6's high
    /// nibble) and the two of the variant (byte 8's high bits), in order. Those six are the
    /// same in every ID, so a larger `bits` gives a larger ID, as bytes and as text.
    static func text(ofFreeBits bits: UInt128) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        for at in 0..<6 { bytes[at] = UInt8(truncatingIfNeeded: bits >> (74 + 8 * (5 - at))) }
        bytes[6] = 0x40 | UInt8(truncatingIfNeeded: bits >> 70) & 0x0F
        bytes[7] = UInt8(truncatingIfNeeded: bits >> 62)
        bytes[8] = 0x80 | UInt8(truncatingIfNeeded: bits >> 56) & 0x3F
        for at in 9..<16 { bytes[at] = UInt8(truncatingIfNeeded: bits >> (8 * (15 - at))) }
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

/// The IDs of the items of one add of `count` items, each greater than the one before
/// (issue 34). Random IDs sent each new catalogue row to a random page of the B-tree: past
/// the catalogue's cache an add held its rows back, spooled them in sorted runs and merged
/// them at the commit, on one core while the other idled (a tenth of a 100,000-note add),
/// and the content files lay on the disk in an order that ID order (a pack's, in `create`)
/// reads at random. Rows in ID order go straight in (`VaultStaging.holdBack`), as a
/// restore's do, and the files lie in ID order.
///
/// The ID space (a version 4 UUID's 122 free bits) is cut into 2^b equal parts, 2^b the
/// smallest power of two not below `count`; the add takes `count` parts in a row from a
/// first one drawn at random among those that leave room for all (so adds of 300 items do
/// not all crowd into the lower 300/512 of the space, and an ID does not tell its place in
/// its add), and each ID is drawn uniformly from its part: its top b bits are the part,
/// the other 122 - b come from the CSPRNG (at least 90 for an add of up to 2^32 items, so
/// two IDs still never meet). Where the vault's content files can be seen, their inodes and
/// times tell the order they were made in anyway; a version 2 archive, whose ZIP directory
/// names entries by ID, now tells it too (DESIGN.md §8.6). Past `count` (a caller that
/// counted wrong) the IDs are random again, and rows from there on are held back as before.
struct AscendingItemIDs {
    private let count: UInt128
    private let randomBits: Int
    private let firstPart: UInt128
    private var position: UInt128 = 0

    init(count: Int) {
        precondition(count >= 0)
        self.count = UInt128(count)
        var positionBits = 0
        while UInt128(1) << positionBits < self.count { positionBits += 1 }
        randomBits = 122 - positionBits
        // At most 2^63 parts: the first is below 2^63 too.
        firstPart = UInt128(Self.uniform(upTo: UInt64((UInt128(1) << positionBits) - max(self.count, 1))))
    }

    mutating func next() -> String {
        guard position < count else { return ItemID.random() }
        defer { position += 1 }
        let random = SecureRandom.bytes(16).reduce(UInt128(0)) { $0 << 8 | UInt128($1) } & (UInt128(1) << randomBits - 1)
        return ItemID.text(ofFreeBits: (firstPart + position) << randomBits | random)
    }

    /// A uniform integer in 0...bound (below 2^63), from the CSPRNG without modulo bias:
    /// drawn under the next power of two and drawn again when above `bound`.
    private static func uniform(upTo bound: UInt64) -> UInt64 {
        var mask: UInt64 = 0
        while mask < bound { mask = mask << 1 | 1 }
        while true {
            let drawn = SecureRandom.bytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } & mask
            if drawn <= bound { return drawn }
        }
    }
}
