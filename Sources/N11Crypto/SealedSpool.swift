import N11System

/// Records written once and read back in order, for what is too large to hold in memory
/// (issue 34: the rows of a listing of millions of items, sorted). They go to a file with no
/// name (`FileDescriptor.createUnnamed`), so nothing is left after the process ends however
/// it ends, sealed as one chunked stream (`ChunkedStream`) under a key made for the spool
/// that lives only in this process's locked memory: item names and metadata never touch the
/// disk readable (DESIGN.md §3), and a spool changed on disk fails its tags when read back.
public final class SpoolFile {
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
        sealer = try ChunkedStreamSealer(key: key, sink: file)
        pending.reserveCapacity(1 << 16)
    }

    deinit { pending.wipe() }

    public func append(_ record: [UInt8]) throws {
        precondition(sealer != nil, "a spool is read once its writing is done")
        var length = UInt32(record.count)
        for _ in 0..<4 { pending.append(UInt8(length & 0xff)); length >>= 8 }
        pending += record
        count += 1
        if pending.count >= 1 << 16 { try flush() }
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
        return try Reader(ChunkedStreamOpener(key: key, source: file))
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
/// and a row and a chunk buffer per run while merging, whatever the number of rows. Rows
/// that fit in one run are never spooled. Equal rows keep no particular order: make the
/// order total (a unique key last).
public struct ExternalSorter<Row> {
    private let runLength: Int
    private let fanIn: Int
    private let directory: String
    private let encode: (Row) -> [UInt8]
    private let decode: ([UInt8]) throws -> Row
    private let isOrderedBefore: (Row, Row) -> Bool
    private var run: [Row] = []
    /// Spooled runs and their level: a run of level L holds `fanIn`^L runs' rows.
    private var runs: [(spool: SpoolFile, level: Int)] = []

    public init(runLength: Int = 32_768, fanIn: Int = 16, directory: String, encode: @escaping (Row) -> [UInt8],
                decode: @escaping ([UInt8]) throws -> Row, by isOrderedBefore: @escaping (Row, Row) -> Bool) {
        precondition(runLength > 0 && fanIn > 1)
        self.runLength = runLength
        self.fanIn = fanIn
        self.directory = directory
        self.encode = encode
        self.decode = decode
        self.isOrderedBefore = isOrderedBefore
    }

    public mutating func add(_ row: Row) throws {
        run.append(row)
        if run.count == runLength { try spoolRun() }
    }

    private mutating func spoolRun() throws {
        run.sort(by: isOrderedBefore)
        let spool = try SpoolFile(in: directory)
        for row in run { try spool.append(encode(row)) }
        try spool.finishWriting()
        run.removeAll(keepingCapacity: true)
        runs.append((spool, 0))
        // `fanIn` runs of one level are merged into one of the next as they come (each row
        // is rewritten once a level: log-many times, not once a run), so open files and the
        // final merge stay few whatever the number of rows.
        while runs.count >= fanIn, case let level = runs[runs.count - 1].level,
              runs.suffix(fanIn).allSatisfy({ $0.level == level }) {
            let merged = try SpoolFile(in: directory)
            try merge(runs.suffix(fanIn).map(\.spool)) { try merged.append(encode($0)) }
            try merged.finishWriting()
            runs.removeLast(fanIn)
            runs.append((merged, level + 1))
        }
    }

    /// Hands every row to `body` in order; the sorter is used up.
    public mutating func forEachSorted(_ body: (Row) throws -> Void) throws {
        if runs.isEmpty {
            run.sort(by: isOrderedBefore)
            for row in run { try body(row) }
            return
        }
        if !run.isEmpty { try spoolRun() }
        var all = runs.map(\.spool)
        runs = []
        while all.count > fanIn {
            let merged = try SpoolFile(in: directory)
            try merge(Array(all[0..<fanIn])) { try merged.append(encode($0)) }
            try merged.finishWriting()
            all.removeFirst(fanIn)
            all.append(merged)
        }
        try merge(all, body)
    }

    /// Merges sorted spools with a binary heap of their next rows.
    private func merge(_ spools: [SpoolFile], _ body: (Row) throws -> Void) throws {
        let readers = try spools.map { try $0.reader() }
        var heap: [(row: Row, source: Int)] = []
        func before(_ a: Int, _ b: Int) -> Bool { isOrderedBefore(heap[a].row, heap[b].row) }
        func siftDown(_ start: Int) {
            var parent = start
            while true {
                let left = 2 * parent + 1, right = left + 1
                var smallest = parent
                if left < heap.count && before(left, smallest) { smallest = left }
                if right < heap.count && before(right, smallest) { smallest = right }
                if smallest == parent { return }
                heap.swapAt(parent, smallest)
                parent = smallest
            }
        }
        for (n, reader) in readers.enumerated() { if let record = try reader.next() { heap.append((try decode(record), n)) } }
        for start in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(start) }
        while let top = heap.first {
            try body(top.row)
            if let record = try readers[top.source].next() {
                heap[0] = (try decode(record), top.source)
            } else {
                heap[0] = heap[heap.count - 1]
                heap.removeLast()
            }
            if !heap.isEmpty { siftDown(0) }
        }
    }
}
