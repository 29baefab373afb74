import Testing
@testable import N11Archiver

@Suite("A restore's outcomes: a value per item, held as one value per chunk where the items agree")
struct OutcomeTableTests {
    /// Three chunks and a bit, so the last chunk is short and odd.
    let count = 3 * OutcomeTable.chunkItems + 7

    @Test("every value set reads back, against a plain array, whatever the order of the writes")
    func matchesAnArray() {
        var table = OutcomeTable(count: count)
        var plain = [UInt8](repeating: 0, count: count)
        var generator = SystemRandomNumberGenerator()
        // In order (as a restore plans), then at random (as a salvage forgets items), then
        // back to one value over a whole chunk.
        for index in 0..<count {
            let value = UInt8(index % 5 == 0 ? 4 : 1)
            table[index] = value
            plain[index] = value
        }
        for _ in 0..<20_000 {
            let index = Int.random(in: 0..<count, using: &generator), value = UInt8.random(in: 0...15, using: &generator)
            table[index] = value
            plain[index] = value
        }
        for index in OutcomeTable.chunkItems..<2 * OutcomeTable.chunkItems {
            table[index] = 3
            plain[index] = 3
        }
        #expect((0..<count).allSatisfy { table[$0] == plain[$0] })
        for value in UInt8(0)...15 {
            var given: [Int] = []
            table.forEachIndex(of: value) { given.append($0) }
            #expect(given == plain.indices.filter { plain[$0] == value }, "value \(value)")
        }
    }

    @Test("a chunk whose items came to one value is held as that value once writes move on; one that differs stays mixed")
    func chunksSettle() {
        var table = OutcomeTable(count: count)
        #expect((0..<4).allSatisfy { table.isUniform(chunk: $0) })
        // All restored, in order: each chunk is mixed while written, uniform after.
        for index in 0..<count { table[index] = 1 }
        #expect((0..<3).allSatisfy { table.isUniform(chunk: $0) })
        #expect(!table.isUniform(chunk: 3), "the chunk last written is settled only when writes move on")
        table[0] = 1   // moves on from the last chunk; chunk 0 keeps its value, so stays uniform
        #expect(table.isUniform(chunk: 3) && table.isUniform(chunk: 0))

        // One item of chunk 1 differs: that chunk stays mixed, the others do not.
        table[OutcomeTable.chunkItems + 5] = 4
        table[count - 1] = 1
        #expect(!table.isUniform(chunk: 1) && table.isUniform(chunk: 3))
        #expect(table[OutcomeTable.chunkItems + 5] == 4 && table[OutcomeTable.chunkItems + 4] == 1)
        // The odd last item alone differing keeps the short chunk mixed.
        table[count - 1] = 2
        table[0] = 1
        #expect(!table.isUniform(chunk: 3))
        table[count - 1] = 1
        table[0] = 1
        #expect(table.isUniform(chunk: 3))
    }
}
