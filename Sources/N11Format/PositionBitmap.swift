/// A set of positions in `0..<limit`, one bit each, read as the ascending list of the
/// positions it holds. A selection of 1,000,000 items of a 3,000,000-item archive is
/// 366 KiB this way where a list of them is 7.6 MiB (issue 34: memory that does not grow
/// with what is picked). Reading position n of the list finds its block of 512 bits by a
/// binary search of the counts before each block, then counts bits in at most 8 words;
/// walking the list in order scans the words and costs nothing more than the scan.
public struct PositionBitmap: RandomAccessCollection, Sendable, Equatable {
    static let wordsPerBlock = 8

    /// Every position the set may hold is below it.
    public let limit: Int
    private let words: [UInt64]
    /// The positions held in the blocks before each block of `wordsPerBlock` words.
    private let heldBefore: [Int]
    public let count: Int

    /// The positions `positions` gives (ascending or not), each below `limit`.
    public init(_ positions: some Sequence<Int>, below limit: Int) {
        var words = [UInt64](repeating: 0, count: (limit + 63) / 64)
        for position in positions {
            precondition(position >= 0 && position < limit, "position \(position) outside 0..<\(limit)")
            words[position >> 6] |= 1 << UInt64(position & 63)
        }
        self.init(words: words, limit: limit)
    }

    /// The set whose position p is held when bit p % 64 of `words[p / 64]` is set.
    init(words: [UInt64], limit: Int) {
        precondition(words.count == (limit + 63) / 64)
        self.limit = limit
        self.words = words
        var heldBefore: [Int] = []
        heldBefore.reserveCapacity((words.count + Self.wordsPerBlock - 1) / Self.wordsPerBlock)
        var held = 0
        for (n, word) in words.enumerated() {
            if n % Self.wordsPerBlock == 0 { heldBefore.append(held) }
            held += word.nonzeroBitCount
        }
        self.heldBefore = heldBefore
        count = held
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    public func contains(_ position: Int) -> Bool {
        position >= 0 && position < limit && words[position >> 6] & (1 << UInt64(position & 63)) != 0
    }

    /// The n-th position held, counting from 0.
    public subscript(n: Int) -> Int {
        precondition(n >= 0 && n < count, "index \(n) outside 0..<\(count)")
        // The last block with at most n positions before it holds the n-th.
        var low = 0, high = heldBefore.count
        while high - low > 1 {
            let middle = (low + high) / 2
            if heldBefore[middle] <= n { low = middle } else { high = middle }
        }
        var remaining = n - heldBefore[low]
        var word = low * Self.wordsPerBlock
        while remaining >= words[word].nonzeroBitCount {
            remaining -= words[word].nonzeroBitCount
            word += 1
        }
        var bits = words[word]
        for _ in 0..<remaining { bits &= bits - 1 }   // drop the lower set bits
        return word << 6 + bits.trailingZeroBitCount
    }

    public struct Iterator: IteratorProtocol {
        private let words: [UInt64]
        private var word = 0
        private var bits: UInt64

        fileprivate init(_ words: [UInt64]) {
            self.words = words
            bits = words.first ?? 0
        }

        public mutating func next() -> Int? {
            while bits == 0 {
                word += 1
                guard word < words.count else { return nil }
                bits = words[word]
            }
            let position = word << 6 + bits.trailingZeroBitCount
            bits &= bits - 1
            return position
        }
    }

    public func makeIterator() -> Iterator { Iterator(words) }
}
