import Foundation
import Testing
@testable import N11Vault

@Suite("New item IDs")
struct ItemIDTests {
    @Test("random version-4 UUIDs in upper case, as seed 003 names items; no two alike")
    func shape() {
        let ids = (0..<2000).map { _ in ItemID.random() }
        #expect(Set(ids).count == ids.count)
        for id in ids.prefix(200) {
            let parsed = UUID(uuidString: id)
            #expect(parsed?.uuidString == id, "\(id) is not an upper-case UUID")
            let bytes = parsed.map { withUnsafeBytes(of: $0.uuid) { Array($0) } } ?? []
            #expect(bytes.count == 16 && bytes[6] >> 4 == 4 && bytes[8] >> 6 == 0b10, "\(id): version 4, RFC 4122 variant")
        }
        // Every hex digit position that is random takes more than one value.
        let varying = (0..<36).filter { i in Set(ids.map { Array($0)[i] }).count > 1 }
        #expect(varying.count == 31, "all 32 hex digits but the version vary: \(varying.count)")
    }

    /// The 122 free bits of a version 4 UUID, the version's and variant's left out.
    static func freeBits(of id: String) -> UInt128? {
        guard let uuid = ItemID.bytes(of: id) else { return nil }
        let b = withUnsafeBytes(of: uuid) { Array($0) }
        guard b[6] >> 4 == 4, b[8] >> 6 == 0b10 else { return nil }
        var bits: UInt128 = 0
        for at in 0..<6 { bits = bits << 8 | UInt128(b[at]) }
        bits = bits << 4 | UInt128(b[6] & 0x0F)
        bits = bits << 8 | UInt128(b[7])
        bits = bits << 6 | UInt128(b[8] & 0x3F)
        for at in 9..<16 { bits = bits << 8 | UInt128(b[at]) }
        return bits
    }

    @Test("an ID made from 122 free bits is a version 4 UUID that gives them back, and larger bits make a larger ID")
    func freeBitsRoundTrip() {
        var rng = SystemRandomNumberGenerator()
        let mask = UInt128(1) << 122 - 1
        let values = (0..<500).map { _ in (UInt128(UInt64.random(in: 0...UInt64.max, using: &rng)) << 64
            | UInt128(UInt64.random(in: 0...UInt64.max, using: &rng))) & mask } + [0, mask, 1, 1 << 56, 1 << 62, 1 << 70, 1 << 74]
        for value in values {
            let id = ItemID.text(ofFreeBits: value)
            #expect(UUID(uuidString: id)?.uuidString == id)
            #expect(Self.freeBits(of: id) == value, "\(id)")
        }
        let sorted = values.sorted()
        for (lower, higher) in zip(sorted, sorted.dropFirst()) where lower != higher {
            #expect(ItemID.text(ofFreeBits: lower) < ItemID.text(ofFreeBits: higher))
        }
    }

    @Test("the IDs of an add that knows its count ascend, each drawn at random in its own part of the ID space; past the count they are random",
          arguments: [1, 2, 3, 5, 1000, 4096, 4097])
    func ascending(count: Int) throws {
        var first = AscendingItemIDs(count: count), second = AscendingItemIDs(count: count)
        let ids = (0..<count).map { _ in first.next() }, others = (0..<count).map { _ in second.next() }
        var parts: UInt128 = 1
        while parts < UInt128(count) { parts <<= 1 }
        let partSize = (UInt128(1) << 122) / parts
        let firstPart = try #require(Self.freeBits(of: ids[0])) / partSize
        #expect(firstPart + UInt128(count) <= parts, "the add's parts run past the last")
        for (position, id) in ids.enumerated() {
            let bits = try #require(Self.freeBits(of: id), "\(id) is not an upper-case version 4 UUID")
            #expect(UUID(uuidString: id)?.uuidString == id)
            #expect(bits / partSize == firstPart + UInt128(position), "\(id) is not in part \(firstPart) + \(position) of \(parts)")
        }
        #expect(zip(ids, ids.dropFirst()).allSatisfy { $0 < $1 }, "not ascending")
        // Up to 65,536 items, the parts differ in the first 16 bits: every 4-character prefix
        // (the shortest an item may be named by) is one item's.
        #expect(Set(ids.map { $0.prefix(4) }).count == count)
        // Random within its part: a second add of as many items draws other IDs.
        #expect(zip(ids, others).allSatisfy { $0 != $1 })
        // A caller that counted too few gets random IDs from there on.
        let beyond = (0..<300).map { _ in first.next() }
        #expect(beyond.allSatisfy { Self.freeBits(of: $0) != nil } && Set(beyond).count == beyond.count)
        #expect(zip(beyond, beyond.dropFirst()).contains { $0 > $1 }, "past the count, still ascending")
    }

    @Test("an add's first part is drawn among all that leave room for its items, not always the lowest",
          arguments: [(3, 2), (300, 213), (5000, 3193)])
    func firstPartVaries(count: Int, choices: Int) throws {
        var parts: UInt128 = 1
        while parts < UInt128(count) { parts <<= 1 }
        let partSize = (UInt128(1) << 122) / parts
        var seen = Set<UInt128>()
        for _ in 0..<max(choices * 8, 64) {
            var ids = AscendingItemIDs(count: count)
            seen.insert(try #require(Self.freeBits(of: ids.next())) / partSize)
        }
        #expect(seen.allSatisfy { $0 < UInt128(choices) })
        #expect(seen.count >= (choices <= 8 ? choices : choices / 2), "only \(seen.count) first parts of \(choices) seen")
    }

    @Test("an add of one item draws its ID from the whole space, as a random one")
    func ascendingOfOne() {
        let firstDigits = Set((0..<400).map { _ in var ids = AscendingItemIDs(count: 1); return ids.next().prefix(1) })
        #expect(firstDigits.count == 16, "first hex digits seen: \(firstDigits.sorted())")
    }

    @Test("IDs read and written by hand agree with Foundation's UUID on the canonical form, either case, and the usual mistakes")
    func parseAndFormat() {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let uuid = bytes.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) }
            let text = ItemID.text(of: bytes)
            #expect(text == UUID(uuid: uuid).uuidString)
            #expect(ItemID.text(of: uuid) == text)
            #expect(ItemID.bytes(of: text).map { withUnsafeBytes(of: $0) { Array($0) } } == bytes)
            #expect(ItemID.bytes(of: text.lowercased()).map { withUnsafeBytes(of: $0) { Array($0) } } == bytes)
        }
        let good = "0A1B2C3D-4E5F-4A6B-8C7D-8E9FA0B1C2D3"
        let cases = [good, good.lowercased(), "0a1B2c3D-4e5F-4a6b-8C7d-8e9fA0b1C2d3",
                     String(good.dropLast()), good + "0", "0A1B2C3D4E5F-4A6B-8C7D-8E9FA0B1C2D3-",
                     "0A1B2C3D-4E5F-4A6B-8C7D_8E9FA0B1C2D3", "0A1B2C3G-4E5F-4A6B-8C7D-8E9FA0B1C2D3",
                     "0A1B2C3D-4E5F-4A6B-8C7D-8E9FA0B1C2Dé", "{0A1B2C3D-4E5F-4A6B-8C7D-8E9FA0B1C2D3}", "",
                     "0A1B2C3D 4E5F 4A6B 8C7D 8E9FA0B1C2D3", "-0A1B2C3D4E5F-4A6B-8C7D-8E9FA0B1C2D3"]
        for text in cases {
            let ours = ItemID.bytes(of: text).map { withUnsafeBytes(of: $0) { Array($0) } }
            let foundation = UUID(uuidString: text).map { withUnsafeBytes(of: $0.uuid) { Array($0) } }
            #expect(ours == foundation, "\(text)")
        }
        #expect(ItemID.bytes(of: good) != nil && ItemID.bytes(of: "0A1B2C3D-4E5F-4A6B-8C7D_8E9FA0B1C2D3") == nil)
    }
}
