import N11System

/// Records written once and read back in order, for what is too large to hold in memory
/// (issue 34: the rows of a listing of millions of items, sorted). They go to a file with no
/// name (`FileDescriptor.createUnnamed`), so nothing is left after the process ends however
/// it ends, sealed as one chunked stream (`ChunkedStream`) under a key made for the spool
/// that lives only in this process's locked memory: item names and metadata never touch the
/// disk readable (DESIGN.md §3), and a spool changed on disk fails its tags when read back.
public final class SpoolFile {
    /// Plaintext bytes per sealed chunk. Smaller than the archive's 64 KiB: a merge holds a
    /// chunk (sealed and opened) per spool it reads, and reads up to `ExternalSorter`'s
    /// fan-in of them at once; the tag costs 16 bytes in 4 KiB. At 8 KiB the last merge of a
    /// listing of 3,000,000 items (92 runs) was the peak of `list` there, 1.4 MB above it now.
    static let chunkSize = 4 * 1024
    /// Internal for tests, which read what reached the disk.
    let file: FileDescriptor
    private let key: SecureBytes
    private var sealer: ChunkedStreamSealer?
    private var pending: [UInt8] = []
    public private(set) var count = 0

    /// `directory`: where the unnamed file goes (a temporary directory).
    public init(in directory: String) throws {
        file = try FileDescriptor.createUnnamed(in: directory)
        key = try SecureBytes(randomCount: 32)
        sealer = try ChunkedStreamSealer(key: key, sink: file, chunkSize: Self.chunkSize)
        pending.reserveCapacity(Self.chunkSize + 256)
    }

    deinit { pending.wipe() }

    public func append(_ record: [UInt8]) throws {
        precondition(sealer != nil, "a spool is read once its writing is done")
        var length = UInt32(record.count)
        for _ in 0..<4 { pending.append(UInt8(length & 0xff)); length >>= 8 }
        pending += record
        count += 1
        if pending.count >= Self.chunkSize { try flush() }
    }

    private func flush() throws {
        try sealer?.write(pending[...])
        pending.wipe()
        pending.removeAll(keepingCapacity: true)
    }

    /// Ends the writing, letting go of its buffers (a sorter keeps many spools written).
    public func finishWriting() throws {
        guard let sealer else { return }
        try flush()
        try sealer.finish()
        self.sealer = nil
        pending = []
    }

    /// Ends the writing; the records can then be read, once, from the first.
    public func reader() throws -> Reader {
        try finishWriting()
        try file.seek(to: 0)
        return try Reader(ChunkedStreamOpener(key: key, source: file, chunkSize: Self.chunkSize))
    }

    public final class Reader {
        private let opener: ChunkedStreamOpener
        private var buffer: [UInt8] = []
        private var offset = 0

        init(_ opener: ChunkedStreamOpener) { self.opener = opener }

        deinit { buffer.wipe() }

        /// The next record, or nil after the last (at the stream's authenticated end).
        public func next() throws -> [UInt8]? {
            guard try fill(4) else {
                guard buffer.count == offset else { throw CryptoError.truncated }
                return nil
            }
            var length = 0
            for i in 0..<4 { length |= Int(buffer[offset + i]) << (8 * i) }
            offset += 4
            guard try fill(length) else { throw CryptoError.truncated }
            defer { offset += length }
            return Array(buffer[offset..<(offset + length)])
        }

        /// Whether `count` bytes are buffered, reading chunks as needed.
        private func fill(_ count: Int) throws -> Bool {
            while buffer.count - offset < count {
                guard let chunk = try opener.nextChunk() else { return false }
                buffer.wipe(prefix: offset)
                buffer.removeFirst(offset)
                offset = 0
                buffer += chunk
            }
            return true
        }
    }
}

/// Sorts more rows than should be held at once: runs of `runLength` rows sorted in memory
/// and spooled (`SpoolFile`), then merged, at most `fanIn` runs at a time. Memory: one run,
/// and while merging a row and about four chunks (`SpoolFile.chunkSize`: sealed, opened and
/// buffered) per spool read, whatever the number of rows. Rows that fit in one run are never
/// spooled. Equal rows keep no particular order: make the order total (a unique key last).
///
/// The order is `key` ascending, then `isOrderedBefore` among rows of one key. The key is a
/// number kept beside each row, so most comparisons touch no row: comparing rows through a
/// closure copied each one (a retain and a release per string it holds, each a cache miss
/// in a run of 32,768 rows), and that was a third of `vault list`'s time at 3,000,000 items.
/// The work is `@inlinable` so that the module that holds `Row` gets it specialized
/// (BENCHMARKS.md, "The listings' sort").
///
/// Each merge before the last rewrites its rows once more, which is most of the cost past a
/// million rows, so merges take the smallest spools and only as many as needed: up to
/// `fanIn` runs (4,194,304 rows at the defaults) no row is rewritten; up to `2 × fanIn - 1`
/// runs only the smallest `runs - fanIn + 1` are merged first. Every spool holds a
/// descriptor (and a locked page for its key), so whenever `2 × fanIn - 1` are open the
/// `fanIn` smallest are merged: at most `2 × fanIn` spools are open at once, and `fanIn` is
/// lowered where RLIMIT_NOFILE would not leave room for them beside the rest of the process.
public struct ExternalSorter<Row> {
    @usableFromInline let runLength: Int
    @usableFromInline let fanIn: Int
    @usableFromInline let directory: String
    @usableFromInline let encode: (Row) -> [UInt8]
    @usableFromInline let decode: ([UInt8]) throws -> Row
    @usableFromInline let key: (Row) -> UInt64
    @usableFromInline let isOrderedBefore: (Row, Row) -> Bool
    @usableFromInline var run: [Row] = []
    @usableFromInline var runKeys: [UInt64] = []
    @usableFromInline var runs: [SpoolFile] = []
    /// Rows written to disk again by merges before the last (what the schedule minimises);
    /// internal, for tests.
    @usableFromInline var rowsRewritten = 0

    public init(runLength: Int = 32_768, fanIn: Int = 128, directory: String, encode: @escaping (Row) -> [UInt8],
                decode: @escaping ([UInt8]) throws -> Row, key: @escaping (Row) -> UInt64 = { _ in 0 },
                by isOrderedBefore: @escaping (Row, Row) -> Bool) {
        precondition(runLength > 0 && fanIn > 1)
        self.runLength = runLength
        // Its 2 × fanIn spools take at most half the descriptors past 64 (the archive, the
        // vault and SQLite keep theirs): 128 at the usual 1,024, 48 at 256.
        self.fanIn = min(fanIn, max(2, (ProcessHardening.openFilesLimit - 64) / 4))
        self.directory = directory
        self.encode = encode
        self.decode = decode
        self.key = key
        self.isOrderedBefore = isOrderedBefore
    }

    @inlinable public mutating func add(_ row: Row) throws {
        runKeys.append(key(row))
        run.append(row)
        if run.count == runLength { try spoolRun() }
    }

    /// The run's indices in row order. An index costs nothing to move, where a sort moves
    /// what it sorts through a buffer by copy.
    @inlinable func sortedOrder() -> [Int] {
        let before = isOrderedBefore
        return runKeys.withUnsafeBufferPointer { keys in
            run.withUnsafeBufferPointer { rows in
                Array(rows.indices).sorted { keys[$0] != keys[$1] ? keys[$0] < keys[$1] : before(rows[$0], rows[$1]) }
            }
        }
    }

    @inlinable mutating func spoolRun() throws {
        let order = sortedOrder()
        let spool = try SpoolFile(in: directory)
        for index in order { try spool.append(encode(run[index])) }
        try spool.finishWriting()
        run.removeAll(keepingCapacity: true)
        runKeys.removeAll(keepingCapacity: true)
        runs.append(spool)
        if runs.count == 2 * fanIn - 1 { try mergeSmallest(fanIn) }
    }

    /// Merges the `count` spools holding the fewest rows into one.
    @inlinable mutating func mergeSmallest(_ count: Int) throws {
        let chosen = Set(runs.indices.sorted { runs[$0].count < runs[$1].count }.prefix(count))
        let merged = try SpoolFile(in: directory)
        try merge(runs.indices.filter(chosen.contains).map { runs[$0] }) { try merged.append(encode($0)) }
        try merged.finishWriting()
        rowsRewritten += merged.count
        runs = runs.indices.filter { !chosen.contains($0) }.map { runs[$0] } + [merged]
    }

    /// Hands every row to `body` in order; the sorter is used up.
    @inlinable public mutating func forEachSorted(_ body: (Row) throws -> Void) throws {
        if runs.isEmpty {
            for index in sortedOrder() { try body(run[index]) }
            return
        }
        if !run.isEmpty { try spoolRun() }
        run = []   // its capacity, a run's worth of rows, is not needed while merging
        runKeys = []
        while runs.count > fanIn { try mergeSmallest(min(fanIn, runs.count - fanIn + 1)) }
        let all = runs
        runs = []
        try merge(all, body)
    }

    /// Merges sorted spools with a binary heap of their next rows: each spool's next row, its
    /// key and its spool, in three arrays moved together, so that sifting compares keys and
    /// moves numbers, and touches a row only between equal keys.
    @inlinable func merge(_ spools: [SpoolFile], _ body: (Row) throws -> Void) throws {
        let readers = try spools.map { try $0.reader() }
        var rows: [Row] = [], keys: [UInt64] = [], sources: [Int] = []
        // A slot of the heap is a place in `order`, which names an entry of the arrays above;
        // an entry stays where it was put, so only Ints move.
        var order: [Int] = []
        for (n, reader) in readers.enumerated() {
            if let record = try reader.next() {
                let row = try decode(record)
                keys.append(key(row)); rows.append(row); sources.append(n); order.append(order.count)
            }
        }
        let before = isOrderedBefore
        func precedes(_ a: Int, _ b: Int) -> Bool {
            let x = order[a], y = order[b]
            return keys[x] != keys[y] ? keys[x] < keys[y] : before(rows[x], rows[y])
        }
        func siftDown(_ start: Int) {
            var parent = start
            while true {
                let left = 2 * parent + 1, right = left + 1
                var smallest = parent
                if left < order.count && precedes(left, smallest) { smallest = left }
                if right < order.count && precedes(right, smallest) { smallest = right }
                if smallest == parent { return }
                order.swapAt(parent, smallest)
                parent = smallest
            }
        }
        for start in stride(from: order.count / 2 - 1, through: 0, by: -1) { siftDown(start) }
        while let top = order.first {
            try body(rows[top])
            if let record = try readers[sources[top]].next() {
                let row = try decode(record)
                keys[top] = key(row)
                rows[top] = row
            } else {
                order[0] = order[order.count - 1]
                order.removeLast()
            }
            if !order.isEmpty { siftDown(0) }
        }
    }
}
