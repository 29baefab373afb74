import Foundation
import N11TestSupport

// A small, readable ZIP reader and writer for building hostile archives byte by byte:
// classic (non-ZIP64) ZIP only, no data descriptors, which is what libzip writes for the
// small archives these tests tamper with. Nothing here recompresses: STORED entries stay
// STORED, and the one compressed entry a test needs is made with DEFLATE "stored" blocks.

/// One entry as it appears in a parsed archive, with the offsets a test needs to patch it.
struct ZipLayoutEntry {
    let name: String
    let localHeaderOffset: Int
    let dataOffset: Int
    let compressedSize: Int
    let uncompressedSize: Int
    let method: UInt16
    let crc: UInt32
    let centralOffset: Int
    let externalAttributes: UInt32
    let versionMadeBy: UInt16

    var localNameOffset: Int { localHeaderOffset + 30 }
    var centralNameOffset: Int { centralOffset + 46 }
}

struct ZipLayout {
    let entries: [ZipLayoutEntry]
    let centralDirectoryOffset: Int
    let centralDirectorySize: Int
    let endRecordOffset: Int

    func entry(named name: String) -> ZipLayoutEntry? { entries.first { $0.name == name } }
}

/// An entry to write.
struct RawZipEntry {
    var name: [UInt8]
    /// The bytes as stored in the file (compressed ones for method 8).
    var data: [UInt8]
    var method: UInt16 = 0
    var uncompressedSize: Int
    var crc: UInt32
    /// Unix mode in the high 16 bits; a regular 0600 file by default, as libzip writes.
    var externalAttributes: UInt32 = UInt32(0o100600) << 16
    /// Upper byte 3: Unix (so the external attributes are a Unix mode).
    var versionMadeBy: UInt16 = 0x033F

    static func stored(_ name: String, _ data: [UInt8]) -> RawZipEntry {
        RawZipEntry(name: Array(name.utf8), data: data, uncompressedSize: data.count, crc: CRC32.checksum(data))
    }

    /// A DEFLATE (method 8) entry, made of uncompressed DEFLATE blocks (RFC 1951 §3.2.4):
    /// a valid compressed entry whose content is still easy to reason about.
    static func deflated(_ name: String, _ data: [UInt8]) -> RawZipEntry {
        var out: [UInt8] = []
        var offset = 0
        repeat {
            let n = min(65535, data.count - offset)
            let final = offset + n == data.count
            out.append(final ? 1 : 0)                       // BFINAL, BTYPE = 00
            out += le16(UInt16(n)) + le16(~UInt16(n))       // LEN, NLEN
            out += data[offset..<(offset + n)]
            offset += n
        } while offset < data.count
        return RawZipEntry(name: Array(name.utf8), data: out, method: 8, uncompressedSize: data.count, crc: CRC32.checksum(data))
    }

    var nameString: String { String(decoding: name, as: UTF8.self) }
}

enum RawZip {
    enum ParseError: Error { case noEndRecord, badSignature(Int), zip64 }

    static func parse(_ b: [UInt8]) throws -> ZipLayout {
        guard b.count >= 22 else { throw ParseError.noEndRecord }
        var eocd = -1
        var i = b.count - 22
        while i >= max(0, b.count - 22 - 65535) {
            if u32(b, i) == 0x0605_4B50 { eocd = i; break }
            i -= 1
        }
        guard eocd >= 0 else { throw ParseError.noEndRecord }
        let count = Int(u16(b, eocd + 10))
        let cdSize = Int(u32(b, eocd + 12))
        let cdOffset = Int(u32(b, eocd + 16))
        guard cdOffset != 0xFFFF_FFFF, count != 0xFFFF else { throw ParseError.zip64 }
        var entries: [ZipLayoutEntry] = []
        var p = cdOffset
        for _ in 0..<count {
            guard u32(b, p) == 0x0201_4B50 else { throw ParseError.badSignature(p) }
            let madeBy = u16(b, p + 4)
            let method = u16(b, p + 10)
            let crc = u32(b, p + 16)
            let csize = Int(u32(b, p + 20)), usize = Int(u32(b, p + 24))
            let nameLength = Int(u16(b, p + 28)), extraLength = Int(u16(b, p + 30)), commentLength = Int(u16(b, p + 32))
            let external = u32(b, p + 38)
            let local = Int(u32(b, p + 42))
            guard csize != 0xFFFF_FFFF, usize != 0xFFFF_FFFF, local != 0xFFFF_FFFF else { throw ParseError.zip64 }
            let name = String(decoding: b[(p + 46)..<(p + 46 + nameLength)], as: UTF8.self)
            guard u32(b, local) == 0x0403_4B50 else { throw ParseError.badSignature(local) }
            let dataOffset = local + 30 + Int(u16(b, local + 26)) + Int(u16(b, local + 28))
            entries.append(ZipLayoutEntry(name: name, localHeaderOffset: local, dataOffset: dataOffset, compressedSize: csize,
                                          uncompressedSize: usize, method: method, crc: crc, centralOffset: p,
                                          externalAttributes: external, versionMadeBy: madeBy))
            p += 46 + nameLength + extraLength + commentLength
        }
        return ZipLayout(entries: entries, centralDirectoryOffset: cdOffset, centralDirectorySize: cdSize, endRecordOffset: eocd)
    }

    /// The entries of an archive as writable entries (their stored bytes copied).
    static func entries(of b: [UInt8]) throws -> [RawZipEntry] {
        try parse(b).entries.map { e in
            RawZipEntry(name: Array(e.name.utf8), data: Array(b[e.dataOffset..<(e.dataOffset + e.compressedSize)]),
                        method: e.method, uncompressedSize: e.uncompressedSize, crc: e.crc,
                        externalAttributes: e.externalAttributes, versionMadeBy: e.versionMadeBy)
        }
    }

    /// A complete ZIP: local headers and data, central directory, end record.
    static func build(_ entries: [RawZipEntry]) -> [UInt8] {
        var out: [UInt8] = []
        var central: [UInt8] = []
        let dosTime: UInt16 = 0, dosDate: UInt16 = 0x21     // 1980-01-01 00:00
        for e in entries {
            let localOffset = out.count
            let needed: UInt16 = e.method == 8 ? 20 : 10
            out += le32(0x0403_4B50) + le16(needed) + le16(0) + le16(e.method) + le16(dosTime) + le16(dosDate)
            out += le32(e.crc) + le32(UInt32(e.data.count)) + le32(UInt32(e.uncompressedSize))
            out += le16(UInt16(e.name.count)) + le16(0) + e.name + e.data
            central += le32(0x0201_4B50) + le16(e.versionMadeBy) + le16(needed) + le16(0) + le16(e.method)
            central += le16(dosTime) + le16(dosDate) + le32(e.crc) + le32(UInt32(e.data.count)) + le32(UInt32(e.uncompressedSize))
            central += le16(UInt16(e.name.count)) + le16(0) + le16(0) + le16(0) + le16(0)
            central += le32(e.externalAttributes) + le32(UInt32(localOffset)) + e.name
        }
        let cdOffset = out.count
        out += central
        out += le32(0x0605_4B50) + le16(0) + le16(0) + le16(UInt16(entries.count)) + le16(UInt16(entries.count))
        out += le32(UInt32(central.count)) + le32(UInt32(cdOffset)) + le16(0)
        return out
    }

    static func u16(_ b: [UInt8], _ i: Int) -> UInt16 { UInt16(b[i]) | UInt16(b[i + 1]) << 8 }
    static func u32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
    }
}

func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * UInt32($0))) } }

