/// The bounds of FORMAT.md §8, checked on declared values before anything is allocated.
public enum FormatLimits {
    public static let headerBytes = 4096
    public static let keyWrapBytes = 12 + 32 + 16
    public static let manifestBytes: Int64 = 256 << 20
    public static let items = 1_000_000
    public static let itemSize: Int64 = 1 << 40
    public static let nameBytes = 255
    public static let chunkSize = 65536
    public static let chunkTag = 16

    /// The payload length a sealed stream of `sealedLength` bytes carries, or nil if no
    /// payload produces that length (FORMAT.md §5: full chunks, then a final one of 16…65552).
    public static func payloadLength(sealedLength: Int64) -> Int64? {
        let full = Int64(chunkSize + chunkTag)
        guard sealedLength >= Int64(chunkTag) else { return nil }
        var chunks = sealedLength / full
        var rest = sealedLength % full
        if rest == 0 { chunks -= 1; rest = full }       // the final chunk is a full one
        guard rest >= Int64(chunkTag) else { return nil }
        if rest == Int64(chunkTag) && chunks > 0 { return nil }   // an empty final chunk after data
        return chunks * Int64(chunkSize) + rest - Int64(chunkTag)
    }

    /// Length of a sealed stream (FORMAT.md §5) for a payload of `payloadSize` bytes.
    public static func sealedLength(payloadSize: Int64) -> Int64 {
        let chunks = max(1, (payloadSize + Int64(chunkSize) - 1) / Int64(chunkSize))
        return payloadSize + chunks * Int64(chunkTag)
    }
}

/// The fixed entry names of FORMAT.md §1 and the rules for item entries.
public enum EntryName {
    public static let header = "header.json"
    public static let keyWrap = "keywrap.bin"
    public static let manifest = "manifest.json"
    public static let fixed = [header, keyWrap, manifest]

    /// `Photos/{ID}.n11` or `Notes/{ID}.n11note`.
    public static func item(id: String, kind: ItemKind) -> String { kind.relativePath(id: id) }

    /// True for a canonical upper-case UUID (8-4-4-4-12 hex digits).
    public static func isCanonicalID(_ id: String) -> Bool {
        // Byte by byte, without copying: the vault checks every file name in `Meta/` with this.
        var count = 0
        for byte in id.utf8 {
            switch count {
            case 8, 13, 18, 23: guard byte == UInt8(ascii: "-") else { return false }
            default:
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "F"): break
                default: return false
                }
            }
            count += 1
            if count > 36 { return false }
        }
        return count == 36
    }

    /// Checks an item entry name from a ZIP: exactly the layout, nothing else
    /// (so `..`, absolute paths, backslashes and NUL bytes are all rejected).
    public static func parseItem(_ name: String) throws(FormatError) -> (id: String, kind: ItemKind) {
        for kind in ItemKind.allCases {
            let prefix = kind.directory + "/", suffix = "." + kind.fileExtension
            guard name.hasPrefix(prefix) && name.hasSuffix(suffix) else { continue }
            let id = String(name.dropFirst(prefix.count).dropLast(suffix.count))
            if isCanonicalID(id) { return (id, kind) }
        }
        throw .invalidEntryName(name)
    }
}

public enum ArchiveMode: String, Codable, Sendable { case portable, secure }
