import Foundation
import N11Crypto
import N11Format

/// What the vault knows about one item. Stored encrypted next to it (`Meta/{ID}.n11meta`),
/// so without the keys only the item's UUID and size are visible.
public struct ItemMetadata: Sendable, Equatable {
    public var id: String
    public var kind: ItemKind
    public var compartment: Compartment
    /// The original file name (or the name given to a note).
    public var name: String
    /// Times are kept as whole milliseconds since 1970 (JSON integers): exact through a
    /// save and load, and fine enough that a `--fade 1s` item lives one second.
    private var createdMilliseconds: Int64
    private var expiresMilliseconds: Int64?
    public var created: Date { Self.date(createdMilliseconds) }
    /// Fade items only: after this moment the item is never listed or read as live.
    public var expires: Date? { expiresMilliseconds.map(Self.date) }
    /// Plaintext size in bytes.
    public var size: Int64
    /// Hex of the content file's Poly1305 tag. The metadata is authenticated with the item ID,
    /// and the tag ties it to one content file, so swapping content files between items of
    /// the same compartment is detected.
    public var contentTag: String
    /// Hex SHA-256 of the plaintext: lets a restore recognise an identical item, and
    /// archives carry it so every restored item is checked end to end.
    public var sha256: String
    /// The ID of the compartment key the record opened under (not stored: the record is
    /// sealed under that key, and so is the content file). Empty for a value made by
    /// hand, which means the current key. Not part of `==`: it says where the item was
    /// read from, not what it is.
    public internal(set) var keyID: [UInt8] = []

    public static func == (a: ItemMetadata, b: ItemMetadata) -> Bool {
        (a.id, a.kind, a.compartment, a.name, a.createdMilliseconds, a.expiresMilliseconds)
            == (b.id, b.kind, b.compartment, b.name, b.createdMilliseconds, b.expiresMilliseconds)
            && (a.size, a.contentTag, a.sha256) == (b.size, b.contentTag, b.sha256)
    }

    /// Item names are labels that may become file names on export: 1…255 bytes, no "/" or NUL.
    public static func checkName(_ name: String) throws(VaultError) {
        let bytes = name.utf8
        guard (1...255).contains(bytes.count), !bytes.contains(0), !bytes.contains(UInt8(ascii: "/")) else {
            throw .invalidName("an item name must be 1 to 255 bytes without '/' or NUL")
        }
    }

    public init(id: String, kind: ItemKind, compartment: Compartment, name: String, created: Date, expires: Date?,
                size: Int64, contentTag: String, sha256: String) {
        self.id = id; self.kind = kind; self.compartment = compartment; self.name = name
        createdMilliseconds = Self.milliseconds(created)
        expiresMilliseconds = expires.map(Self.milliseconds)
        self.size = size; self.contentTag = contentTag; self.sha256 = sha256
    }

    /// For `parse`, which reads the stored milliseconds directly.
    init(id: String, kind: ItemKind, compartment: Compartment, name: String, createdMilliseconds: Int64,
         expiresMilliseconds: Int64?, size: Int64, contentTag: String, sha256: String) {
        self.id = id; self.kind = kind; self.compartment = compartment; self.name = name
        self.createdMilliseconds = createdMilliseconds; self.expiresMilliseconds = expiresMilliseconds
        self.size = size; self.contentTag = contentTag; self.sha256 = sha256
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    static func date(_ milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    public func isExpired(at now: Date) -> Bool {
        guard let expires else { return false }
        return expires <= now
    }

    /// The content file's path inside the vault, as seed 003 lays it out.
    public var relativePath: String { kind.relativePath(id: id) }

    /// The record's JSON: keys sorted, times as whole milliseconds, `expires` only for fade items.
    func serialized() -> [UInt8] {
        var w = JSONWriter(capacity: 384)
        w.object { w in
            w.key("compartment"); w.string(compartment.rawValue)
            w.key("contentTag"); w.string(contentTag)
            w.key("created"); w.integer(createdMilliseconds)
            if let expiresMilliseconds { w.key("expires"); w.integer(expiresMilliseconds) }
            w.key("id"); w.string(id)
            w.key("kind"); w.string(kind.rawValue)
            w.key("name"); w.string(name)
            w.key("sha256"); w.string(sha256)
            w.key("size"); w.integer(size)
        }
        return w.bytes
    }

    /// Reads a decrypted record under the format's JSON rules (`JSONReader`). Fields this
    /// version does not know are skipped (a later version may add some: the record is
    /// authenticated, so they can only come from a writer that holds the key); `expires`
    /// may be `null`, meaning none.
    static func parse(_ plain: [UInt8]) throws(JSONReader.Failure) -> ItemMetadata {
        try JSONReader.read(plain) { reader in
            var id: String?, kind: ItemKind?, compartment: Compartment?, name: String?, contentTag: String?, sha256: String?
            var created: Int64?, size: Int64?, expires: Int64?
            try reader.object { key, reader in
                switch key {
                case "id": try reader.fill(&id, try reader.string())
                case "kind": try reader.fill(&kind, try reader.string(ItemKind.self))
                case "compartment": try reader.fill(&compartment, try reader.string(Compartment.self))
                case "name": try reader.fill(&name, try reader.string())
                case "contentTag": try reader.fill(&contentTag, try reader.string())
                case "sha256": try reader.fill(&sha256, try reader.string())
                case "created": try reader.fill(&created, try reader.integer())
                case "size": try reader.fill(&size, try reader.integer())
                case "expires": if !reader.null() { try reader.fill(&expires, try reader.integer()) }
                default: try reader.skip()
                }
            }
            return ItemMetadata(id: try reader.required(id, "id"), kind: try reader.required(kind, "kind"),
                                compartment: try reader.required(compartment, "compartment"),
                                name: try reader.required(name, "name"),
                                createdMilliseconds: try reader.required(created, "created"), expiresMilliseconds: expires,
                                size: try reader.required(size, "size"), contentTag: try reader.required(contentTag, "contentTag"),
                                sha256: try reader.required(sha256, "sha256"))
        }
    }

    /// Records are sealed with ChaCha20-Poly1305 under their compartment's key.
    static let algorithm = AEADAlgorithm.chacha20Poly1305

    /// Associated data of the metadata record: binds the record to its item ID.
    static func associatedData(id: String) -> [UInt8] { Array("n11archive.item-metadata.v1:\(id)".utf8) }

    func sealed(with key: SecureBytes) throws -> [UInt8] {
        try sealed(by: AEADSealer(Self.algorithm, key: key))
    }

    /// `nonce ‖ ciphertext ‖ tag` under `sealer`'s key (one context for many records).
    func sealed(by sealer: AEADSealer) throws -> [UInt8] {
        var plain = serialized()
        defer { plain.wipe() }
        return try sealer.seal(plain, aad: Self.associatedData(id: id))
    }

    /// Opens a metadata record with `opener`'s key; nil if the key is not this record's.
    static func open(_ sealed: [UInt8], id: String, opener: AEADOpener) -> ItemMetadata? {
        guard var plain = opener.open(sealed, aad: associatedData(id: id)) else { return nil }
        defer { plain.wipe() }
        guard let metadata = decode(plain), metadata.id == id else { return nil }
        return metadata
    }

    /// A decrypted record's fields, or nil if it does not read as a record.
    static func decode(_ plain: [UInt8]) -> ItemMetadata? { try? parse(plain) }
}

/// Fade lifetimes: a number and a unit (s, m, h, d, w), e.g. `90s`, `12h`, `7d`.
public enum FadeDuration {
    public static func seconds(from text: String) throws(VaultError) -> TimeInterval {
        let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800]
        // Plain decimal numbers only ("1.5h"), not the hex or exponent forms Double accepts.
        let number = text.dropLast()
        let parts = number.split(separator: ".", omittingEmptySubsequences: false)
        guard let unit = text.last, let factor = units[unit], number.count <= 12, (1...2).contains(parts.count),
              parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
              let value = Double(number), value > 0, value * factor <= 100 * 365 * 86400 else { throw .invalidDuration(text) }
        return value * factor
    }
}

