import Foundation
import N11Crypto

// Byte helpers shared by the test targets.

/// `count` bytes from the system's random number generator.
public func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    var out = [UInt8](repeating: 0, count: count)
    var i = 0
    while i < count {
        var word = generator.next()
        for _ in 0..<8 where i < count {
            out[i] = UInt8(truncatingIfNeeded: word)
            word >>= 8
            i += 1
        }
    }
    return out
}

/// Whether `needle` occurs anywhere in `haystack` (an empty needle always does).
public func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return needle.isEmpty }
    return haystack.withUnsafeBufferPointer { h in
        let first = needle[0]
        for i in 0...(h.count - needle.count) where h[i] == first {
            if h[i..<(i + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }
}

/// A password or PIN as the library takes it.
public func secret(_ text: String) throws -> SecureBytes {
    try SecureBytes(copying: Array(text.utf8))
}

/// Collects what a vault or archive read stages (tests only: a real sink keeps it out of sight).
public final class CollectingSink: UnverifiedPlaintextSink {
    public private(set) var bytes: [UInt8] = []
    public init() {}
    public func stage(_ chunk: ArraySlice<UInt8>) throws { bytes.append(contentsOf: chunk) }
}

/// CRC-32 (ISO-HDLC, the ZIP one).
public enum CRC32 {
    static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = table[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}

/// Changes the bytes of a stored ZIP entry of the file at `path` in place, keeping its
/// length, and fixes its CRC-32 in the local header and the central directory: the edit
/// is then seen only by what authenticates the content (a MAC, a signature), not by the ZIP
/// layer. For the small, non-ZIP64 archives tests tamper with.
public func editStoredEntry(in path: String, named name: String, _ edit: (inout [UInt8]) -> Void) throws {
    var bytes = try readBytes(path)
    func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
    func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
    func putCRC(_ crc: UInt32, at offset: Int) {
        for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i))) }
    }
    let wanted = Array(name.utf8)
    var offset = 0, crc: UInt32? = nil
    while offset + 30 <= bytes.count, u32(offset) == 0x0403_4B50 {
        let size = u32(offset + 18), nameLength = u16(offset + 26), extraLength = u16(offset + 28)
        let dataStart = offset + 30 + nameLength + extraLength
        if Array(bytes[(offset + 30)..<(offset + 30 + nameLength)]) == wanted {
            var data = Array(bytes[dataStart..<(dataStart + size)])
            edit(&data)
            precondition(data.count == size, "editStoredEntry keeps the entry's length")
            bytes.replaceSubrange(dataStart..<(dataStart + size), with: data)
            crc = CRC32.checksum(data)
            putCRC(crc!, at: offset + 14)
            break
        }
        offset = dataStart + size
    }
    guard let crc else { throw CocoaError(.fileReadCorruptFile) }
    // The central directory's record of the same name.
    var central = bytes.count - 22
    while central > 0, u32(central) != 0x0605_4B50 { central -= 1 }
    var at = u32(central + 16)
    while at + 46 <= bytes.count, u32(at) == 0x0201_4B50 {
        let nameLength = u16(at + 28), extraLength = u16(at + 30), commentLength = u16(at + 32)
        if Array(bytes[(at + 46)..<(at + 46 + nameLength)]) == wanted { putCRC(crc, at: at + 16) }
        at += 46 + nameLength + extraLength + commentLength
    }
    try writeBytes(bytes, to: path)
}
