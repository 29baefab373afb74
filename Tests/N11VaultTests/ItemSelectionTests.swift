import Testing
import N11Format

// The one rule for picking items by a word (restore's ITEM, as `vault rm` takes it): an ID,
// a unique-enough ID prefix, or an exact name; never a guess between two of those.
@Suite("ItemSelection")
struct ItemSelectionTests {
    private let items: [(id: String, name: String)] = [
        ("0A1B2C3D-0000-4000-8000-000000000001", "beach.jpg"),
        ("0A1B9999-0000-4000-8000-000000000002", "photo[1].jpg"),
        ("C0FFEE00-0000-4000-8000-000000000003", "photo1.jpg"),
        ("D00D0000-0000-4000-8000-000000000004", "0a1b"),
        ("E0000000-0000-4000-8000-000000000005", "twice.jpg"),
        ("F0000000-0000-4000-8000-000000000006", "twice.jpg"),
        ("12340000-0000-4000-8000-000000000007", "ab"),
    ]

    private func pick(_ words: [String], names: [String] = [], allowMany: Bool = true) throws(ItemSelection.Problem) -> [String] {
        try ItemSelection(ids: words, names: names).indices(in: items, id: \.id, name: \.name, allowMany: allowMany).map { items[$0].name }
    }

    @Test("a whole ID, a prefix and an exact name each pick their items; a name is never a glob")
    func forms() throws {
        #expect(try pick(["0A1B2C3D-0000-4000-8000-000000000001"]) == ["beach.jpg"])
        #expect(try pick(["c0ffee"]) == ["photo1.jpg"])
        #expect(try pick(["photo[1].jpg"]) == ["photo[1].jpg"])
        #expect(try pick(["twice.jpg"]) == ["twice.jpg", "twice.jpg"])
        #expect(throws: ItemSelection.Problem.noMatch(pattern: "photo?.jpg", isName: false)) { try pick(["photo?.jpg"]) }
        #expect(try pick([], names: ["photo?.jpg"]) == ["photo1.jpg"])
    }

    @Test("a word that starts one item's ID and is another's name is refused, as is a shared name where one item is needed")
    func ambiguous() {
        #expect(throws: ItemSelection.Problem.ambiguous(pattern: "0a1b", matches: [items[0].id, items[1].id, items[3].id])) {
            try pick(["0a1b"])
        }
        #expect(throws: ItemSelection.Problem.ambiguous(pattern: "twice.jpg", matches: [items[4].id, items[5].id])) {
            try pick(["twice.jpg"], allowMany: false)
        }
        // Where one item is needed, a prefix several IDs share is refused though it is also a name.
        #expect(throws: ItemSelection.Problem.ambiguous(pattern: "0a1b", matches: [items[0].id, items[1].id])) {
            try pick(["0a1b"], allowMany: false)
        }
        // A longer prefix picks one; a word too short for a prefix but a name is that name.
        #expect((try? pick(["0A1B2C"])) == ["beach.jpg"])
        #expect((try? pick(["ab"])) == ["ab"])
        #expect(throws: ItemSelection.Problem.prefixTooShort("cd")) { try pick(["cd"]) }
    }
}
