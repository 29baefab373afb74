import Foundation
import Testing
@testable import N11Crypto
import N11System

@Suite("Sealed spools and the external sort (rows too many to hold)")
struct SpoolTests {
    private func temporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "/spool-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return path
    }

    @Test("records come back as written, across chunks; the file has no name and holds none of their bytes")
    func roundTrip() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let marker = Array("PLAINTEXT-MARKER-".utf8)
        let records: [[UInt8]] = [[], [7], marker + [UInt8](repeating: 0x41, count: 70_000), marker, Array(repeating: 9, count: 3)]
        let spool = try SpoolFile(in: directory)
        for record in records { try spool.append(record) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty)
        let reader = try spool.reader()
        var back: [[UInt8]] = []
        while let record = try reader.next() { back.append(record) }
        #expect(back == records)

        // What the disk holds is ciphertext: the marker is nowhere in it.
        try spool.file.seek(to: 0)
        var onDisk: [UInt8] = [], buffer = [UInt8](repeating: 0, count: 1 << 16)
        while case let n = try spool.file.read(into: &buffer, count: buffer.count), n > 0 { onDisk += buffer[0..<n] }
        #expect(onDisk.count > 70_000)
        #expect(!(0...(onDisk.count - marker.count)).contains { Array(onDisk[$0..<($0 + marker.count)]) == marker })
    }

    @Test("a spool changed on disk fails its tag instead of handing out other rows")
    func tamperedSpool() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let spool = try SpoolFile(in: directory)
        for n in 0..<100 { try spool.append(Array("row \(n)".utf8)) }
        try spool.finishWriting()
        var byte = [UInt8](repeating: 0, count: 1)
        _ = try spool.file.read(into: &byte, count: 1, at: 10)
        try spool.file.seek(to: 10)
        try spool.file.write([byte[0] ^ 1])
        #expect(throws: CryptoError.self) { let reader = try spool.reader(); while try reader.next() != nil {} }
    }

    /// A sorter of UInt32 rows, spooled as their four bytes.
    static func sorter(runLength: Int, fanIn: Int, directory: String, key: @escaping (UInt32) -> UInt64 = { _ in 0 },
                       by isOrderedBefore: @escaping (UInt32, UInt32) -> Bool) -> ExternalSorter<UInt32> {
        ExternalSorter<UInt32>(runLength: runLength, fanIn: fanIn, directory: directory,
                               encode: { value in (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } },
                               decode: { bytes in (0..<4).reduce(0) { $0 | UInt32(bytes[$1]) << (8 * $1) } },
                               key: key, by: isOrderedBefore)
    }

    @Test("rows come out sorted: in memory when they fit one run, else through spooled runs merged in several rounds",
          arguments: [5, 100_000])
    func sorts(runLength: Int) throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var generator = SystemRandomNumberGenerator()
        let rows = (0..<2_000).map { _ in UInt32.random(in: 0..<500, using: &generator) }
        var sorter = Self.sorter(runLength: runLength, fanIn: 3, directory: directory, by: <)
        for row in rows { try sorter.add(row) }
        var out: [UInt32] = []
        try sorter.forEachSorted { out.append($0) }
        #expect(out == rows.sorted())
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty)
    }

    @Test("rows come out by key, and by the comparison among rows of one key, in memory and through spools",
          arguments: [7, 100_000])
    func sortsByKeyThenComparison(runLength: Int) throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var generator = SystemRandomNumberGenerator()
        // The key is the high byte, a few values for many ties; the comparison orders the rest
        // backwards, so a sorter that ignored either would come out in another order.
        let rows = (0..<3_000).map { _ in UInt32.random(in: 0..<4, using: &generator) << 24 | UInt32.random(in: 0..<1_000, using: &generator) }
        var sorter = Self.sorter(runLength: runLength, fanIn: 3, directory: directory, key: { UInt64($0 >> 24) },
                                 by: { $0 & 0xFF_FFFF > $1 & 0xFF_FFFF })
        for row in rows { try sorter.add(row) }
        var out: [UInt32] = []
        try sorter.forEachSorted { out.append($0) }
        #expect(out == rows.sorted { ($0 >> 24, $1 & 0xFF_FFFF) < ($1 >> 24, $0 & 0xFF_FFFF) })
    }

    @Test("merges before the last take the smallest spools, and no more of them than the last merge needs",
          arguments: [(rows: 40, rewritten: 0), (rows: 45, rewritten: 15), (rows: 61, rewritten: 31), (rows: 100, rewritten: 80)])
    func mergeSchedule(rows: Int, rewritten: Int) throws {
        // Runs of 10, fan-in 4: 4 runs merge at the end alone; 5 runs (the last of 5 rows)
        // first merge the two smallest (5 + 10); 7 runs (the last of 1) the four smallest
        // (1 + 30); 10 runs merge four as the 7th arrives and four as the 10th does.
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var sorter = Self.sorter(runLength: 10, fanIn: 4, directory: directory, by: <)
        let input = (0..<UInt32(rows)).map { ($0 * 7_919) % UInt32(rows) }
        for row in input { try sorter.add(row) }
        var out: [UInt32] = []
        try sorter.forEachSorted { out.append($0) }
        #expect(out == input.sorted())
        #expect(sorter.rowsRewritten == rewritten)
    }
}
