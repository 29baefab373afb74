/// The fixed entry names of FORMAT.md §1 and the rules for item entries.
public enum EntryName {
    public static let header = "header.json"
    public static let keyWrap = "keywrap.bin"
    public static let headerMAC = "header.mac"
    public static let manifest = "manifest.json"
    /// The entries before the items: version 1 has `keywrap.bin` second, version 2 `header.mac`.
    public static let fixed = [header, headerMAC, manifest]
    public static func fixed(version: Int) -> [String] { [header, version == 1 ? keyWrap : headerMAC, manifest] }
    /// The second entry's name for the version in the header, and its exact size.
    public static func second(version: Int) -> (name: String, size: Int) {
        version == 1 ? (keyWrap, FormatLimits.keyWrapBytes) : (headerMAC, FormatLimits.headerMACBytes)
    }

    /// Version 3 (DESIGN.md §8.2): `header.sig` after `header.mac` in a signed archive, the
    /// manifest's pages and root, and the packs of item payloads.
    public static let headerSignature = "header.sig"
    public static let manifestRoot = "Manifest/root.n11"
    public static func page(_ number: Int) -> String { "Manifest/\(number).n11page" }
    public static func pack(_ number: Int) -> String { "Packs/\(number).n11pack" }

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

    /// Whether `name` is one of the layout's entry names, of any version (FORMAT.md §1).
    public static func isInLayout(_ name: String) -> Bool {
        [header, keyWrap, headerMAC, manifest, headerSignature, manifestRoot].contains(name) || (try? parseItem(name)) != nil
            || isNumbered(name, prefix: "Manifest/", suffix: ".n11page") || isNumbered(name, prefix: "Packs/", suffix: ".n11pack")
    }

    /// N of `PREFIX{N}SUFFIX`, N in decimal without leading zeros below 2^32 (version 3's
    /// pages and packs); nil for any other name.
    public static func number(of name: String, prefix: String, suffix: String) -> Int? {
        guard name.hasPrefix(prefix), name.hasSuffix(suffix), name.count > prefix.count + suffix.count else { return nil }
        let digits = name.dropFirst(prefix.count).dropLast(suffix.count)
        guard digits.count <= 10, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }), digits == "0" || digits.first != "0",
              let n = Int(digits), n < 1 << 32 else { return nil }
        return n
    }

    static func isNumbered(_ name: String, prefix: String, suffix: String) -> Bool {
        number(of: name, prefix: prefix, suffix: suffix) != nil
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
