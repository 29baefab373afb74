import Foundation
import Testing
import N11Format
@testable import N11Archiver

@Suite("An export's file names: the first candidate no earlier item took, remembered outside memory")
struct ExportNamesTests {
    private func item(_ id: String, _ name: String, _ kind: ItemKind = .photo) -> Manifest.Item {
        Manifest.Item(id: id, kind: kind, compartment: .vault, name: name, created: Date(timeIntervalSince1970: 0),
                      expires: nil, size: 1, sha256: String(repeating: "0", count: 64), mode: .portable)
    }

    @Test("same names get ~ID8, then ~ID8-2 when the ID prefix is shared too; a name that looks like a renamed one is taken into account; folders are apart")
    func candidates() throws {
        let items = [
            item("AAAAAAAA-0000-4000-8000-000000000001", "a.jpg"),
            item("BBBBBBBB-0000-4000-8000-000000000002", "a.jpg"),
            item("BBBBBBBB-0000-4000-8000-000000000003", "a.jpg"),   // same first 8 as the one before
            item("CCCCCCCC-0000-4000-8000-000000000004", "a~BBBBBBBB.jpg"),   // the second's name, given before
            item("DDDDDDDD-0000-4000-8000-000000000005", "a.jpg", .note),    // Notes/, apart from Photos/
            item("EEEEEEEE-0000-4000-8000-000000000006", ".."),
        ]
        let expected = [
            ("Photos", "a.jpg"), ("Photos", "a~BBBBBBBB.jpg"), ("Photos", "a~BBBBBBBB-2.jpg"),
            ("Photos", "a~BBBBBBBB~CCCCCCCC.jpg"), ("Notes", "a.jpg"), ("Photos", "EEEEEEEE-0000-4000-8000-000000000006"),
        ]
        let names = try ExportNames()
        for (index, item) in items.enumerated() {
            let given = try names.give(index: index, item)
            #expect(given.folder == expected[index].0 && given.name == expected[index].1, "item \(index): \(given)")
        }
        // Made again from what was kept: the same names, in any order.
        for (index, item) in items.enumerated().reversed() {
            let again = try names.name(index: index, item)
            #expect(again.folder == expected[index].0 && again.name == expected[index].1, "item \(index): \(again)")
        }
    }

    @Test("many items of one name each get their own, past the 255 candidates a byte would hold")
    func manyOfOneName() throws {
        let names = try ExportNames()
        var given = Set<String>()
        let prefix = "FFFFFFFF-0000-4000-8000-"
        for index in 0..<300 {
            let id = prefix + String(format: "%012d", index)
            let name = try names.give(index: index, item(id, "same.txt", .note)).name
            #expect(given.insert(name).inserted, "\(name) given twice")
            #expect(try names.name(index: index, item(id, "same.txt", .note)).name == name)
        }
        #expect(given.contains("same~FFFFFFFF-299.txt"))
    }
}
