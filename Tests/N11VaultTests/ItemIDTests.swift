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
