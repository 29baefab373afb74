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

// The selection a restore keeps for an archive of millions: a bit an item, read back as the
// ascending list of positions it holds.
@Suite("PositionBitmap")
struct PositionBitmapTests {
    @Test("reads back as the sorted positions it was given, by index and in order, at every size around a word and a block",
          arguments: [0, 1, 63, 64, 65, 511, 512, 513, 5_000])
    func readsBack(limit: Int) {
        var generator = SplitMix(seed: UInt64(limit))   // the same sets every run
        for density in [0.0, 0.01, 0.5, 1.0] {
            let positions = (0..<limit).filter { _ in Double.random(in: 0..<1, using: &generator) < density }
            let bitmap = PositionBitmap(positions.shuffled(using: &generator), below: limit)
            #expect(bitmap.count == positions.count)
            #expect(Array(bitmap) == positions)
            #expect(positions.indices.map { bitmap[$0] } == positions)
            #expect((0..<limit).filter(bitmap.contains) == positions)
            #expect(!bitmap.contains(limit) && !bitmap.contains(-1))
        }
    }

    @Test("the last position of a full last block, and the first of the next")
    func blockEdges() {
        let positions = [0, 511, 512, 1_023, 1_024, 4_095]
        let bitmap = PositionBitmap(positions, below: 4_096)
        #expect(positions.indices.map { bitmap[$0] } == positions)
        #expect(Array(bitmap[2...]) == [512, 1_023, 1_024, 4_095])
    }
}

// The streaming matcher is what `indices(in:)` runs; items fed one at a time give the same
// answer and the same refusals as the whole list did.
@Suite("ItemSelection.Matcher")
struct ItemSelectionMatcherTests {
    @Test("fed one item at a time, it picks across the whole list and names the first pattern that fails")
    func streaming() throws {
        var matcher = ItemSelection.Matcher(ItemSelection(ids: ["c0ffee"], names: ["n*7"]))
        for n in 0..<100 {
            let id = n == 42 ? "C0FFEE00-0000-4000-8000-000000000042" : String(format: "%08X-0000-4000-8000-000000000000", n)
            matcher.see(id: id, name: "n\(n)")
        }
        #expect(Array(try matcher.finish()) == [7, 17, 27, 37, 42, 47, 57, 67, 77, 87, 97])

        var failing = ItemSelection.Matcher(ItemSelection(ids: ["ab"], names: ["nothing*"]))
        failing.see(id: "00000000-0000-4000-8000-000000000000", name: "x")
        #expect(throws: ItemSelection.Problem.prefixTooShort("ab")) { try failing.finish() }

        var unmatchedGlob = ItemSelection.Matcher(ItemSelection(names: ["x", "nothing*"]))
        unmatchedGlob.see(id: "00000000-0000-4000-8000-000000000000", name: "x")
        #expect(throws: ItemSelection.Problem.noMatch(pattern: "nothing*", isName: true)) { try unmatchedGlob.finish() }
    }

    @Test("a word is a prefix by its length in capitals (ß is SS); of two items with one ID (a damaged archive) the first is picked")
    func capitalsAndRepeatedIDs() throws {
        var matcher = ItemSelection.Matcher(ItemSelection(ids: ["\u{FB00}\u{FB00}"]))   // "ﬀﬀ": two characters, "FFFF" in capitals
        matcher.see(id: "FFFF1234-0000-4000-8000-000000000000", name: "a")
        matcher.see(id: "0FFF1234-0000-4000-8000-000000000000", name: "b")
        #expect(Array(try matcher.finish()) == [0])

        let twice = "ABCD0000-0000-4000-8000-000000000000"
        var repeated = ItemSelection.Matcher(ItemSelection(ids: [twice]), allowMany: false)
        for name in ["x", "first", "second"] { repeated.see(id: name == "x" ? "00000000-0000-4000-8000-000000000000" : twice, name: name) }
        #expect(Array(try repeated.finish()) == [1])
    }

    @Test("with nothing seen, every pattern fails")
    func empty() {
        let matcher = ItemSelection.Matcher(ItemSelection(names: ["*"]))
        #expect(throws: ItemSelection.Problem.noMatch(pattern: "*", isName: true)) { try matcher.finish() }
    }
}

/// A seeded generator (SplitMix64), so a failing set can be made again.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
