/// One small value (0...15) per archive item, for a restore's outcomes (`ArchiveRestorer.
/// Report`). A byte an item grew a restore of 3,000,000 notes by 2.9 MiB (issue 34: memory
/// that does not depend on the item count). A restore's items are mostly alike (all
/// restored, or all already there), so the items are kept in chunks of 65,536: a chunk whose
/// items all have one value is that value, any other chunk two values to a byte. Values are
/// set chunk after chunk in a restore, so a chunk is made uniform again (if it is) when
/// writes move on to another one: one mixed chunk at a time, 32 KiB, unless the outcomes
/// really are mixed.
struct OutcomeTable: Sendable {
    static let chunkShift = 16
    static let chunkItems = 1 << chunkShift

    private enum Chunk: Sendable {
        case uniform(UInt8)
        /// Item `i` of the chunk in the low nibble of byte i/2 when i is even, the high when odd.
        case mixed([UInt8])
    }

    let count: Int
    private var chunks: [Chunk]
    /// The chunk last written to, not yet made uniform again.
    private var writing: Int?

    /// `count` items, each 0.
    init(count: Int) {
        self.count = count
        chunks = Array(repeating: .uniform(0), count: (count + Self.chunkItems - 1) / Self.chunkItems)
    }

    /// Items in chunk `chunk`.
    private func items(in chunk: Int) -> Int { min(Self.chunkItems, count - chunk << Self.chunkShift) }

    subscript(index: Int) -> UInt8 {
        get {
            precondition(index >= 0 && index < count)
            switch chunks[index >> Self.chunkShift] {
            case .uniform(let value): return value
            case .mixed(let bytes): return Self.nibble(bytes, index & (Self.chunkItems - 1))
            }
        }
        set {
            precondition(index >= 0 && index < count && newValue < 16)
            let chunk = index >> Self.chunkShift, offset = index & (Self.chunkItems - 1)
            if writing != chunk {
                if let writing { settle(writing) }
                writing = chunk
            }
            var bytes: [UInt8]
            switch chunks[chunk] {
            case .uniform(let value):
                guard value != newValue else { return }
                bytes = [UInt8](repeating: value | value << 4, count: (items(in: chunk) + 1) / 2)
            case .mixed(let held):
                bytes = held
                chunks[chunk] = .uniform(0)   // the array held once, not copied when written
            }
            let shift: UInt8 = offset & 1 == 0 ? 0 : 4
            bytes[offset >> 1] = bytes[offset >> 1] & ~(0xF << shift) | newValue << shift
            chunks[chunk] = .mixed(bytes)
        }
    }

    /// The indices whose value is `value`, in order; a uniform chunk is passed over or given
    /// whole without a look at its items.
    func forEachIndex(of value: UInt8, _ body: (Int) throws -> Void) rethrows {
        for chunk in chunks.indices {
            let first = chunk << Self.chunkShift
            switch chunks[chunk] {
            case .uniform(let held):
                guard held == value else { continue }
                for index in first..<first + items(in: chunk) { try body(index) }
            case .mixed(let bytes):
                for offset in 0..<items(in: chunk) where Self.nibble(bytes, offset) == value { try body(first + offset) }
            }
        }
    }

    /// Makes `chunk` uniform if all its items have one value.
    private mutating func settle(_ chunk: Int) {
        guard case .mixed(let bytes) = chunks[chunk] else { return }
        let first = Self.nibble(bytes, 0)
        let pair = first | first << 4, items = items(in: chunk)
        // Whole bytes compared as pairs; an odd last item alone (its byte's high nibble is no item).
        guard bytes.prefix(items / 2).allSatisfy({ $0 == pair }),
              items & 1 == 0 || Self.nibble(bytes, items - 1) == first else { return }
        chunks[chunk] = .uniform(first)
    }

    /// Whether chunk `chunk` is held as one value (for tests).
    func isUniform(chunk: Int) -> Bool {
        if case .uniform = chunks[chunk] { return true }
        return false
    }

    private static func nibble(_ bytes: [UInt8], _ offset: Int) -> UInt8 {
        bytes[offset >> 1] >> (offset & 1 == 0 ? 0 : 4) & 0xF
    }
}
