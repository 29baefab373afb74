/// The first entry of a ZIP read from the first bytes of the file alone, through its local
/// header (signature, sizes, name): enough to see an archive's `header.json` without
/// fetching the whole file from a remote. Unauthenticated, like everything before the key.
public enum ZipPrefix {
    /// The first entry's name and data if it is stored (not compressed) and lies within `bytes`.
    public static func firstEntry(of bytes: [UInt8]) -> (name: String, data: [UInt8])? {
        entries(of: bytes, count: 1).first
    }

    /// Up to `count` consecutive entries from the start, each stored and lying within `bytes`
    /// (n11archive writes its fixed entries first, one after another); fewer if one is not.
    public static func entries(of bytes: [UInt8], count: Int) -> [(name: String, data: [UInt8])] {
        var found: [(name: String, data: [UInt8])] = []
        var offset = 0
        while found.count < count, let entry = entry(in: bytes, at: offset) {
            found.append((entry.name, entry.data))
            offset = entry.end
        }
        return found
    }

    private static func entry(in bytes: [UInt8], at start: Int) -> (name: String, data: [UInt8], end: Int)? {
        func u16(_ at: Int) -> Int { Int(bytes[start + at]) | Int(bytes[start + at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        guard bytes.count - start >= 30, u32(0) == 0x0403_4B50 else { return nil }
        let flags = u16(6), method = u16(8), size = u32(18), nameLength = u16(26), extraLength = u16(28)
        // Sizes in a data descriptor (flag 3), or compressed: not what n11archive writes.
        guard flags & 0x0008 == 0, method == 0, size != 0xFFFF_FFFF else { return nil }
        let dataStart = start + 30 + nameLength + extraLength
        guard dataStart + size <= bytes.count else { return nil }
        let name = String(decoding: bytes[(start + 30)..<(start + 30 + nameLength)], as: UTF8.self)
        return (name, Array(bytes[dataStart..<(dataStart + size)]), dataStart + size)
    }
}
