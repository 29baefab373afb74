import Foundation
import Testing
@testable import N11Vault

@Suite("New item IDs")
struct ItemIDTests {
    @Test("random version-4 UUIDs in upper case, as seed 003 names items; no two alike")
    func shape() {
        let ids = (0..<2000).map { _ in Vault.newItemID() }
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
}
