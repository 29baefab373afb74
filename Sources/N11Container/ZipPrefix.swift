/// The first entry of a ZIP read from the first bytes of the file alone, through its local
/// header (signature, sizes, name): enough to see an archive's `header.json` without
/// fetching the whole file from a remote. Unauthenticated, like everything before the key.
public enum ZipPrefix {
    /// The first entry's name and data if it is stored (not compressed) and lies within `bytes`.
    public static func firstEntry(of bytes: [UInt8]) -> (name: String, data: [UInt8])? {
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        guard bytes.count >= 30, u32(0) == 0x0403_4B50 else { return nil }
        let flags = u16(6), method = u16(8), size = u32(18), nameLength = u16(26), extraLength = u16(28)
        // Sizes in a data descriptor (flag 3), or compressed: not what n11archive writes.
        guard flags & 0x0008 == 0, method == 0, size != 0xFFFF_FFFF else { return nil }
        let dataStart = 30 + nameLength + extraLength
        guard dataStart + size <= bytes.count else { return nil }
        let name = String(decoding: bytes[30..<(30 + nameLength)], as: UTF8.self)
        return (name, Array(bytes[dataStart..<(dataStart + size)]))
    }
}
