import Foundation
import N11System

/// The decrypted `manifest.json` (FORMAT.md §6): every item of the archive, in entry order.
public struct Manifest: Codable, Sendable, Equatable {
    public struct Item: Codable, Sendable, Equatable {
        public let id: String
        public let kind: ItemKind
        public let compartment: Compartment
        public let name: String
        public let created: Date
        public let expires: Date?
        public let size: Int64
        public let sha256: String
        public let entry: String
        public let payloadSize: Int64

        public init(id: String, kind: ItemKind, compartment: Compartment, name: String, created: Date,
                    expires: Date?, size: Int64, sha256: String, mode: ArchiveMode) {
            self.id = id; self.kind = kind; self.compartment = compartment; self.name = name
            self.created = created; self.expires = expires; self.size = size; self.sha256 = sha256
            entry = EntryName.item(id: id, kind: kind)
            payloadSize = mode == .portable ? size : size + FormatLimits.vaultFileOverhead
        }

        /// Every field as stored, for `Manifest.scanned`.
        init(id: String, kind: ItemKind, compartment: Compartment, name: String, created: Date, expires: Date?,
             size: Int64, sha256: String, entry: String, payloadSize: Int64) {
            self.id = id; self.kind = kind; self.compartment = compartment; self.name = name
            self.created = created; self.expires = expires; self.size = size; self.sha256 = sha256
            self.entry = entry; self.payloadSize = payloadSize
        }

        static let fields: Set<String> = ["id", "kind", "compartment", "name", "created", "expires", "size", "sha256", "entry", "payloadSize"]

        public init(from decoder: any Decoder) throws {
            try decoder.requireOnlyKeys(Self.fields, in: "manifest item")
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(String.self, forKey: .id)
            kind = try c.decode(ItemKind.self, forKey: .kind)
            compartment = try c.decode(Compartment.self, forKey: .compartment)
            name = try c.decode(String.self, forKey: .name)
            created = try c.decode(Date.self, forKey: .created)
            // Absent for items that do not fade; `null` is not a valid value.
            expires = c.contains(.expires) ? try c.decode(Date.self, forKey: .expires) : nil
            size = try c.decode(Int64.self, forKey: .size)
            sha256 = try c.decode(String.self, forKey: .sha256)
            entry = try c.decode(String.self, forKey: .entry)
            payloadSize = try c.decode(Int64.self, forKey: .payloadSize)
        }

        /// The plaintext digest as bytes (its hex form is checked when the manifest is parsed).
        public var sha256Bytes: [UInt8] { [UInt8](hex: sha256, length: 32) ?? [] }

        /// Length of this item's ZIP entry.
        public var sealedSize: Int64 { FormatLimits.sealedLength(payloadSize: payloadSize) }

        public func isExpired(at now: Date) -> Bool { expires.map { $0 <= now } ?? false }
    }

    public let version: Int
    public let archiveId: String
    public let mode: ArchiveMode
    public let created: Date
    public let items: [Item]

    public init(header: ArchiveHeader, items: [Item]) {
        version = 1
        archiveId = header.archiveIDHex
        mode = header.mode
        created = header.created
        self.items = items
    }

    init(version: Int, archiveId: String, mode: ArchiveMode, created: Date, items: [Item]) {
        self.version = version; self.archiveId = archiveId; self.mode = mode; self.created = created; self.items = items
    }

    static let fields: Set<String> = ["version", "archiveId", "mode", "created", "items"]

    public init(from decoder: any Decoder) throws {
        try decoder.requireOnlyKeys(Self.fields, in: "manifest")
        let c = try decoder.container(keyedBy: CodingKeys.self)
        version = try c.decode(Int.self, forKey: .version)
        archiveId = try c.decode(String.self, forKey: .archiveId)
        mode = try c.decode(ArchiveMode.self, forKey: .mode)
        created = try c.decode(Date.self, forKey: .created)
        items = try c.decode([Item].self, forKey: .items)
    }

    /// The manifest's JSON: written directly when no string needs escaping (always, for the
    /// IDs, digests and names create writes, unless a name has a quote, a backslash or a
    /// control character), byte for byte what `JSONCoding.encoder()` writes; by that encoder
    /// otherwise. JSONEncoder took about 6 µs per item, on the thread that then writes the ZIP.
    public func serialized() throws -> [UInt8] {
        if let written = directlyWritten() { return written }
        return Array(try JSONCoding.encoder().encode(self))
    }

    /// Parses decrypted manifest bytes and checks them against the header (FORMAT.md §6).
    public init(parsing bytes: [UInt8], header: ArchiveHeader) throws(FormatError) {
        if let problem = StrictJSONValidator.problem(in: bytes) { throw .invalidManifest(problem) }
        if let scanned = Self.scanned(bytes) {
            self = scanned
        } else {
            do { self = try JSONCoding.decoder().decode(Manifest.self, from: Data(bytes)) }
            catch { throw .invalidManifest(JSONCoding.reason(error)) }
        }
        guard version == 1 else { throw .unsupportedVersion(version) }
        guard archiveId == header.archiveIDHex, mode == header.mode, created == header.created else {
            throw .invalidManifest("it belongs to another archive")
        }
        guard items.count <= FormatLimits.items else { throw .limitExceeded("\(items.count) items (at most \(FormatLimits.items))") }
        var seen = Set<String>()
        for item in items {
            guard EntryName.isCanonicalID(item.id), seen.insert(item.id).inserted else { throw .invalidManifest("item ID '\(item.id)' is malformed or repeated") }
            guard item.entry == EntryName.item(id: item.id, kind: item.kind) else { throw .invalidEntryName(item.entry) }
            guard (0...FormatLimits.itemSize).contains(item.size) else { throw .limitExceeded("item \(item.id) size \(item.size)") }
            guard item.payloadSize == (mode == .portable ? item.size : item.size + FormatLimits.vaultFileOverhead) else { throw .invalidManifest("item \(item.id) payload size") }
            guard [UInt8](hex: item.sha256, length: 32) != nil else { throw .invalidManifest("item \(item.id) digest") }
            let nameBytes = item.name.utf8
            guard (1...FormatLimits.nameBytes).contains(nameBytes.count), !nameBytes.contains(0), !nameBytes.contains(UInt8(ascii: "/")) else {
                throw .invalidManifest("item \(item.id) name")
            }
            guard (item.compartment == .fade) == (item.expires != nil) else { throw .invalidManifest("item \(item.id) expiry") }
        }
    }
}
