import Foundation
import N11System

/// The decrypted `manifest.json` (FORMAT.md §6): every item of the archive, in entry order.
public struct Manifest: Encodable, Sendable, Equatable {
    public struct Item: Encodable, Sendable, Equatable {
        public let id: String
        public let kind: ItemKind
        public let compartment: Compartment
        public let name: String
        public let created: Date
        public let expires: Date?
        public let size: Int64
        public let sha256: String
        /// The ZIP entry that holds the item's payload: its own (versions 1 and 2), or its
        /// pack (version 3, from `offset`).
        public let entry: String
        public let payloadSize: Int64
        /// Version 3: where the payload starts in its pack.
        public let offset: Int64?
        /// Version 3, incremental: the ID of the archive whose pack holds the payload, when it
        /// is not this archive (one of its `dependsOn`).
        public let heldBy: String?

        public init(id: String, kind: ItemKind, compartment: Compartment, name: String, created: Date,
                    expires: Date?, size: Int64, sha256: String, mode: ArchiveMode, pack: (entry: String, offset: Int64)? = nil,
                    heldBy: String? = nil) {
            self.id = id; self.kind = kind; self.compartment = compartment; self.name = name
            self.created = created; self.expires = expires; self.size = size; self.sha256 = sha256
            entry = pack?.entry ?? EntryName.item(id: id, kind: kind)
            offset = pack?.offset
            self.heldBy = heldBy
            payloadSize = mode == .portable ? size : size + FormatLimits.vaultFileOverhead
        }

        /// One item as stored in `items` (FORMAT.md §6); unknown fields are refused.
        init(reading reader: inout JSONReader) throws {
            var id: String?, kind: ItemKind?, compartment: Compartment?, name: String?, created: Date?
            var expires: Date?, size: Int64?, sha256: String?, entry: String?, payloadSize: Int64?
            try reader.object { key, reader in
                switch key {
                case "id": try reader.fill(&id, try reader.string())
                case "kind": try reader.fill(&kind, try reader.string(ItemKind.self))
                case "compartment": try reader.fill(&compartment, try reader.string(Compartment.self))
                case "name": try reader.fill(&name, try reader.string())
                case "created": try reader.fill(&created, try reader.timestamp())
                // Absent for items that do not fade; `null` is not a valid value.
                case "expires": try reader.fill(&expires, try reader.timestamp())
                case "size": try reader.fill(&size, try reader.integer())
                case "sha256": try reader.fill(&sha256, try reader.string())
                case "entry": try reader.fill(&entry, try reader.string())
                case "payloadSize": try reader.fill(&payloadSize, try reader.integer())
                default: throw reader.unknownField()
                }
            }
            self.id = try reader.required(id, "id")
            self.kind = try reader.required(kind, "kind")
            self.compartment = try reader.required(compartment, "compartment")
            self.name = try reader.required(name, "name")
            self.created = try reader.required(created, "created")
            self.expires = expires
            self.size = try reader.required(size, "size")
            self.sha256 = try reader.required(sha256, "sha256")
            self.entry = try reader.required(entry, "entry")
            self.payloadSize = try reader.required(payloadSize, "payloadSize")
            offset = nil
            heldBy = nil
        }

        /// Writes the item with its keys sorted.
        func write(to w: inout JSONWriter) {
            w.object { w in
                w.key("compartment"); w.string(compartment.rawValue)
                w.key("created"); w.timestamp(created)
                w.key("entry"); w.string(entry)
                if let expires { w.key("expires"); w.timestamp(expires) }
                w.key("id"); w.string(id)
                w.key("kind"); w.string(kind.rawValue)
                w.key("name"); w.string(name)
                w.key("payloadSize"); w.integer(payloadSize)
                w.key("sha256"); w.string(sha256)
                w.key("size"); w.integer(size)
            }
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
    /// Secure archives: the ID of the compartment key each compartment's item files are
    /// sealed under (FORMAT.md §6), so that one made before a key rotation finds its retired
    /// key. Absent in portable archives, and in secure archives written before key
    /// rotation existed (which were all sealed under the compartments' first keys).
    public let vaultKeys: [Compartment: [UInt8]]?

    private enum CodingKeys: String, CodingKey { case version, archiveId, mode, created, items }

    public init(header: ArchiveHeader, items: [Item], vaultKeys: [Compartment: [UInt8]]? = nil) {
        version = 1
        archiveId = header.archiveIDHex
        mode = header.mode
        created = header.created
        self.items = items
        self.vaultKeys = vaultKeys
    }

    /// The manifest's JSON (FORMAT.md §6): keys sorted, no white space, `expires` left out
    /// when absent. Written directly (JSONEncoder took about 6 µs per item, on the thread that
    /// then writes the ZIP).
    public func serialized() -> [UInt8] {
        var w = JSONWriter(capacity: 256 + items.count * 330)
        w.object { w in
            w.key("archiveId"); w.string(archiveId)
            w.key("created"); w.timestamp(created)
            w.key("items")
            w.array { w in for item in items { item.write(to: &w) } }
            w.key("mode"); w.string(mode.rawValue)
            if let vaultKeys {
                w.key("vaultKeys")
                w.object { w in
                    // Keys sorted, as everywhere in the manifest.
                    if let id = vaultKeys[.backup] { w.key("backup"); w.string(id.hex) }
                    if let id = vaultKeys[.fade] { w.key("fade"); w.string(id.hex) }
                    if let id = vaultKeys[.vault] { w.key("vault"); w.string(id.hex) }
                }
            }
            w.key("version"); w.integer(version)
        }
        return w.bytes
    }

    /// The fields as read (FORMAT.md §6), before the checks of `init(parsing:header:)`.
    private init(reading reader: inout JSONReader) throws {
        var version: Int?, archiveId: String?, mode: ArchiveMode?, created: Date?, items: [Item]?
        var vaultKeys: [Compartment: [UInt8]]?
        try reader.object { key, reader in
            switch key {
            case "version": try reader.fill(&version, try reader.integer(Int.self))
            case "archiveId": try reader.fill(&archiveId, try reader.string())
            case "mode": try reader.fill(&mode, try reader.string(ArchiveMode.self))
            case "created": try reader.fill(&created, try reader.timestamp())
            case "items":
                var list: [Item] = []
                try reader.array { reader in list.append(try Item(reading: &reader)) }
                try reader.fill(&items, list)
            case "vaultKeys":
                var ids: [Compartment: [UInt8]] = [:]
                try reader.object { name, reader in
                    guard let compartment = Compartment(rawValue: name), ids[compartment] == nil,
                          let id = [UInt8](hex: try reader.string(), length: 16) else { throw reader.unknownField() }
                    ids[compartment] = id
                }
                try reader.fill(&vaultKeys, ids)
            default: throw reader.unknownField()
            }
        }
        self.version = try reader.required(version, "version")
        self.archiveId = try reader.required(archiveId, "archiveId")
        self.mode = try reader.required(mode, "mode")
        self.created = try reader.required(created, "created")
        self.items = try reader.required(items, "items")
        self.vaultKeys = vaultKeys
    }

    /// Parses decrypted manifest bytes and checks them against the header (FORMAT.md §6).
    public init(parsing bytes: [UInt8], header: ArchiveHeader) throws(FormatError) {
        do { self = try JSONReader.read(bytes) { reader in try Manifest(reading: &reader) } }
        catch { throw .invalidManifest(error.description) }
        guard version == 1 else { throw .unsupportedVersion(version) }
        guard archiveId == header.archiveIDHex, mode == header.mode, created == header.created else {
            throw .invalidManifest("it belongs to another archive")
        }
        guard vaultKeys == nil || mode == .secure else { throw .invalidManifest("vaultKeys in a portable archive") }
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
            guard vaultKeys == nil || vaultKeys?[item.compartment] != nil else { throw .invalidManifest("item \(item.id): no key ID for its compartment") }
            guard (item.compartment == .fade) == (item.expires != nil) else { throw .invalidManifest("item \(item.id) expiry") }
        }
    }
}
