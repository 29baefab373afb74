internal import CZip
import N11System

/// One entry found by its local header, without the central directory.
struct ScannedEntry {
    let name: String
    let size: Int64
    let dataOffset: Int64
    let crc32: UInt32
}

/// Finds a ZIP's entries by walking its local headers from the start of the file, for when
/// the central directory is damaged (a salvage, FORMAT.md §1.1). n11archive writes every
/// entry STORED, with its sizes and CRC in the local header and no data descriptor, so each
/// header says where the next one starts. Where a header does not read (a damaged byte in it,
/// or the central directory reached), the walk looks for the next local-header signature
/// whose header reads and whose name `accepts` takes; ciphertext that happens to contain the
/// signature is thereby skipped (a wrong name or size), and whatever is found is authenticated
/// by the format before any of it is used.
struct LocalHeaderScan {
    let file: FileDescriptor
    let fileSize: Int64
    let accepts: (String) -> Bool
    /// The most entries taken: a crafted file of tiny entries must not fill memory before
    /// the reader's bound on the entry count refuses it.
    let maximumEntries: Int

    private static let signature: [UInt8] = [0x50, 0x4B, 0x03, 0x04]

    /// Stops after `maximumEntries + 1` entries, so that the caller sees the bound broken.
    func entries() throws -> [ScannedEntry] {
        var found: [ScannedEntry] = []
        var window = Window()
        var offset: Int64 = 0
        while offset + 30 <= fileSize && found.count <= maximumEntries {
            if let entry = try entry(at: offset) {
                found.append(entry)
                offset = entry.dataOffset + entry.size
            } else if let next = try nextSignature(after: offset, in: &window) {
                offset = next
            } else {
                break
            }
        }
        return found
    }

    /// The part of the file last read while looking for a signature: a run of signatures
    /// that are no entries (crafted) is searched in it, not read again for each.
    private struct Window {
        var bytes = [UInt8](repeating: 0, count: 1 << 20)
        var start: Int64 = 0
        var count = 0
    }

    /// The entry whose local header starts at `offset`, if it is one n11archive writes.
    private func entry(at offset: Int64) throws -> ScannedEntry? {
        var fixed = [UInt8](repeating: 0, count: 30)
        guard try file.read(into: &fixed, count: 30, at: offset) == 30, Array(fixed[0..<4]) == Self.signature else { return nil }
        func u16(_ at: Int) -> Int { Int(fixed[at]) | Int(fixed[at + 1]) << 8 }
        func u32(_ at: Int) -> UInt32 { UInt32(u16(at)) | UInt32(u16(at + 2)) << 16 }
        let flags = u16(6), method = u16(8), nameLength = u16(26), extraLength = u16(28)
        // Encrypted (bits 0, 6, 13), sizes in a data descriptor (bit 3), or compressed: never written.
        guard flags & 0x2049 == 0, method == 0, nameLength > 0 else { return nil }
        var variable = [UInt8](repeating: 0, count: nameLength + extraLength)
        guard try file.read(into: &variable, count: variable.count, at: offset + 30) == variable.count else { return nil }
        guard let name = String(validating: variable[0..<nameLength], as: UTF8.self), accepts(name) else { return nil }
        var compressed = Int64(u32(18)), uncompressed = Int64(u32(22))
        if compressed == 0xFFFF_FFFF || uncompressed == 0xFFFF_FFFF {
            guard let sizes = Self.zip64Sizes(in: variable[nameLength...], uncompressed: uncompressed == 0xFFFF_FFFF,
                                              compressed: compressed == 0xFFFF_FFFF) else { return nil }
            (uncompressed, compressed) = (sizes.uncompressed ?? uncompressed, sizes.compressed ?? compressed)
        }
        let dataOffset = offset + 30 + Int64(variable.count)
        // (Compared without adding: a ZIP64 size near 2^63 must not overflow.)
        guard compressed == uncompressed, compressed >= 0, compressed <= fileSize - dataOffset else { return nil }
        return ScannedEntry(name: name, size: compressed, dataOffset: dataOffset, crc32: u32(14))
    }

    /// The ZIP64 extra field's sizes (APPNOTE 4.5.3): the original size, then the compressed
    /// size, each present only where the header's 32-bit field is 0xFFFFFFFF.
    private static func zip64Sizes(in extra: ArraySlice<UInt8>, uncompressed: Bool, compressed: Bool) -> (uncompressed: Int64?, compressed: Int64?)? {
        var at = extra.startIndex
        func u16(_ i: Int) -> Int { Int(extra[i]) | Int(extra[i + 1]) << 8 }
        func u64(_ i: Int) -> Int64 {
            (0..<8).reduce(Int64(0)) { $0 | Int64(extra[i + $1]) << (8 * Int64($1)) }
        }
        while at + 4 <= extra.endIndex {
            let id = u16(at), length = u16(at + 2)
            let body = at + 4
            guard body + length <= extra.endIndex else { return nil }
            if id == 0x0001 {
                var field = body
                var sizes: (uncompressed: Int64?, compressed: Int64?) = (nil, nil)
                if uncompressed { guard field + 8 <= body + length else { return nil }; sizes.uncompressed = u64(field); field += 8 }
                if compressed { guard field + 8 <= body + length else { return nil }; sizes.compressed = u64(field) }
                return sizes
            }
            at = body + length
        }
        return nil
    }

    /// The offset of the next local-header signature after `offset`, if any.
    private func nextSignature(after offset: Int64, in window: inout Window) throws -> Int64? {
        var start = offset + 1
        while start + 4 <= fileSize {
            let inWindow = start >= window.start && start + 4 <= window.start + Int64(window.count)
            if !inWindow {
                window.start = start
                window.count = try file.read(into: &window.bytes, count: window.bytes.count, at: start)
                guard window.count >= 4 else { return nil }
            }
            let from = Int(start - window.start)
            if let hit = window.bytes[from..<window.count].firstRange(of: Self.signature) { return window.start + Int64(hit.lowerBound) }
            // The last three bytes again: a signature may straddle two windows.
            start = window.start + Int64(window.count - 3)
            window.count = 0
        }
        return nil
    }
}

/// An entry found by `LocalHeaderScan`, read straight from the file; with `expectedCRC`, the
/// CRC-32 is checked when the read reaches the entry's end, as libzip does.
final class ScannedEntrySource: ByteSource {
    private let file: FileDescriptor
    private let entry: ScannedEntry
    private let checksCRC: Bool
    private var position: Int64 = 0
    private var crc: UInt = 0
    private var scratch: [UInt8] = []

    init(file: FileDescriptor, entry: ScannedEntry, checksCRC: Bool) {
        self.file = file
        self.entry = entry
        self.checksCRC = checksCRC
    }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        precondition(offset + count <= buffer.count)
        let wanted = Int(min(Int64(count), entry.size - position))
        guard wanted > 0 else { return 0 }
        if scratch.count < wanted { scratch = [UInt8](repeating: 0, count: wanted) }
        let n = try file.read(into: &scratch, count: wanted, at: entry.dataOffset + position)
        guard n > 0 else { throw ContainerError.entryReadFailed(name: entry.name, cause: .endsInsideEntry) }
        buffer.replaceSubrange(offset..<(offset + n), with: scratch[0..<n])
        position += Int64(n)
        if checksCRC {
            crc = scratch.withUnsafeBufferPointer { crc32(crc, $0.baseAddress, uInt(n)) }
            if position == entry.size, UInt32(truncatingIfNeeded: crc) != entry.crc32 {
                throw ContainerError.entryReadFailed(name: entry.name, cause: .crcMismatch)
            }
        }
        return n
    }
}
