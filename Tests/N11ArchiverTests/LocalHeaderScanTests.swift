import Foundation
import Testing
import N11Container
import N11Format
import N11System
import N11TestSupport

/// CRC-32 (ISO-HDLC, as ZIP uses), bit by bit: the test's own, independent of zlib.
private func crc32(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
    }
    return ~crc
}

/// A ZIP local file header (APPNOTE 4.3.7) for a STORED entry, with `declared` sizes in its
/// 32-bit fields (0xFFFFFFFF: from a ZIP64 extra field holding `zip64`).
private func localHeader(_ name: String, _ data: [UInt8], declared: UInt32? = nil, zip64: UInt64? = nil) -> [UInt8] {
    func u16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }
    func u32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(v >> (8 * $0) & 0xFF) } }
    func u64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(v >> (8 * UInt64($0)) & 0xFF) } }
    let nameBytes = Array(name.utf8)
    let extra: [UInt8] = zip64.map { u16(1) + u16(16) + u64($0) + u64($0) } ?? []
    let size = declared ?? UInt32(data.count)
    return [0x50, 0x4B, 0x03, 0x04] + u16(45) + u16(0x0800) + u16(0) + u16(0) + u16(0) + u32(crc32(data)) + u32(size) + u32(size)
        + u16(nameBytes.count) + u16(extra.count) + nameBytes + extra + data
}

private let itemName = "Photos/3F2A9C1B-0C4E-4A57-9E0B-6A1D2C3B4E5F.n11"

private func scan(_ bytes: [UInt8], in dir: String, maximumEntries: Int = 1000) throws -> ZipReader {
    let path = dir + "/scanned.zip"
    try writeBytes(bytes, to: path)
    return try ZipReader(scanningLocalHeadersOf: path, maximumEntries: maximumEntries, accepting: EntryName.isInLayout)
}

/// The salvage's walk over local headers (FORMAT.md §1.1) on hostile and damaged input.
@Suite("Local-header scan (salvage)")
struct LocalHeaderScanTests {
    @Test("entries follow one another; a damaged header is skipped and the walk finds the next one; names outside the layout are not taken")
    func walkAndResync() throws {
        try withTemporaryDirectory { dir in
            let a = localHeader(EntryName.header, Array("{}".utf8))
            var broken = localHeader("Notes/00000000-0000-4000-8000-000000000001.n11note", randomBytes(500))
            broken[8] = 8   // "deflated": not what n11archive writes
            let c = localHeader(itemName, randomBytes(3_000))
            let stranger = localHeader("../etc/passwd", randomBytes(10))
            let zip = try scan(a + broken + stranger + c + randomBytes(100), in: dir)
            #expect(zip.entryCount == 2)
            let first = try zip.entry(at: 0), second = try zip.entry(at: 1)
            #expect(first.name == EntryName.header)
            #expect(second.name == itemName && second.size == 3_000)
            var buffer = [UInt8](repeating: 0, count: 4_000)
            let read = try zip.open(second, checkCRC: false).readFully(into: &buffer, count: 4_000)
            #expect(read == 3_000)
            #expect(Array(buffer[0..<3_000]) == Array(c.suffix(3_000)))
        }
    }

    @Test("a ZIP64 size near 2^63, or one past the end of the file, gives no entry (and no overflow)")
    func hostileSizes() throws {
        try withTemporaryDirectory { dir in
            let huge = localHeader(itemName, [], declared: 0xFFFF_FFFF, zip64: 0x7FFF_FFFF_FFFF_FFFF)
            let hugeCount = try scan(huge + randomBytes(64), in: dir).entryCount
            #expect(hugeCount == 0)
            let pastEnd = localHeader(itemName, randomBytes(10), declared: 1_000_000)
            let pastEndCount = try scan(pastEnd, in: dir).entryCount
            #expect(pastEndCount == 0)
            // A ZIP64 extra with the true size is read.
            let data = randomBytes(777)
            let sized = try scan(localHeader(itemName, data, declared: 0xFFFF_FFFF, zip64: 777), in: dir).entry(at: 0)
            #expect(sized.size == 777)
        }
    }

    @Test("a file of false signatures is walked once, and a flood of tiny entries stops past the bound")
    func bounded() throws {
        try withTemporaryDirectory { dir in
            let pattern: [UInt8] = [0x50, 0x4B, 0x03, 0x04]
            let signatures = (0..<(4 << 20)).map { pattern[$0 % 4] }
            let none = try scan(signatures, in: dir).entryCount
            #expect(none == 0)
            let tiny = (0..<50).flatMap { n in localHeader(String(format: "Notes/00000000-0000-4000-8000-%012d.n11note", n), []) }
            let bounded = try scan(tiny, in: dir, maximumEntries: 10).entryCount
            #expect(bounded == 11)
        }
    }

    @Test("an entry's CRC-32 is checked against its local header when a read reaches its end")
    func crc() throws {
        try withTemporaryDirectory { dir in
            var bytes = localHeader(EntryName.header, Array("{\"v\":1}".utf8))
            var read = [UInt8](repeating: 0, count: 64)
            let sound = try scan(bytes, in: dir)
            let got = try sound.open(sound.entry(at: 0)).readFully(into: &read, count: 64)
            #expect(got == 7)
            bytes[14] ^= 0xFF   // the CRC field
            let zip = try scan(bytes, in: dir)
            var buffer = [UInt8](repeating: 0, count: 64)
            let entry = try zip.entry(at: 0)
            let failure = #expect(throws: ContainerError.self) { _ = try zip.open(entry).readFully(into: &buffer, count: 64) }
            guard case .entryReadFailed(_, .crcMismatch)? = failure else { Issue.record("not a CRC failure: \(String(describing: failure))"); return }
        }
    }
}
