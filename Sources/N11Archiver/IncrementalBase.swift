import Foundation
import N11Format
import N11System
import N11Vault

/// What an incremental archive builds on (DESIGN.md §8.3), decided from this home's record of
/// what it shipped to the destination and what the destination holds now, before anything
/// is written: the archives it depends on, and for each item already there, where.
public struct IncrementalBase: Sendable {
    /// Sorted, unique, at most `ManifestV3.dependencies`.
    public let dependsOn: [[UInt8]]
    /// By item ID: the location in `dependsOn[holder − 1]`'s packs, and the size and SHA-256
    /// the item had there (an item changed since is packed again, whatever the record says).
    public let reused: [String: Reused]

    public struct Reused: Sendable {
        public let location: ItemLocation
        public let size: Int64
        public let sha256: String
    }
    /// An unchanged night: the manifest it is the same as (`dependsOn[holder − 1]`'s root).
    public let sameAs: (holder: Int, rootSHA256: [UInt8])?
    /// For an unchanged night, the record's items as they stay.
    let sameAsItems: [String: ShipmentRecord.Item]?

    /// The base, or why the night is a full archive.
    public enum Decision: Sendable {
        case incremental(IncrementalBase)
        case full(why: String)
    }

    /// Decides. `record`: the destination's state (nil: none); `objects`: what it holds now;
    /// `items`: the live items the archive will list; `fullEvery`: the oldest a dependency
    /// may be (so prune can free space).
    public static func decide(record: ShipmentRecord.Destination?, objects: [StoredObject], items: [ItemMetadata],
                              mode: ArchiveMode, access: String, vaultKeys: String, now: Date, fullEvery: TimeInterval) -> Decision {
        guard let record else { return .full(why: "there is no record of what this home has shipped there") }
        guard record.mode == mode else { return .full(why: "the last archive there was \(record.mode.rawValue)") }
        guard record.access == access else { return .full(why: "the passwords or recipients it opens with changed since the last archive") }
        guard record.vaultKeys == vaultKeys else { return .full(why: "the vault's keys were rotated since the last archive") }
        var reused: [String: ShipmentRecord.Item] = [:]
        for item in items {
            if let shipped = record.items[item.id], shipped.sha256 == item.sha256, shipped.size == item.size { reused[item.id] = shipped }
        }
        let unchanged = reused.count == items.count && Set(items.map(\.id)) == Set(record.items.keys)
        var needed = Set(reused.values.map(\.archive))
        if unchanged { needed.insert(record.listArchive) }
        let present = Dictionary(objects.map { ($0.name, $0.size) }, uniquingKeysWith: { first, _ in first })
        for id in needed {
            guard let archive = record.archives[id], present[archive.name] == archive.size else {
                return .full(why: "archive \(id) (\(record.archives[id]?.name ?? "?")), which holds items of the last one, is no longer there")
            }
            // Made "later" than now: a clock was wrong then (or is now). A reader refuses a
            // dependency newer than the archive, so never build on one.
            if archive.created > now {
                return .full(why: "\(archive.name), which it would build on, is dated in the future (a clock was wrong)")
            }
            if archive.created < now.addingTimeInterval(-fullEvery) {
                return .full(why: "the oldest archive it would need (\(archive.name)) is older than --full-every")
            }
        }
        guard needed.count <= ManifestV3.dependencies else { return .full(why: "it would need more than \(ManifestV3.dependencies) archives") }
        let dependsOn = needed.compactMap { [UInt8](hex: $0, length: 16) }.sorted { $0.lexicographicallyPrecedes($1) }
        let index = Dictionary(uniqueKeysWithValues: dependsOn.enumerated().map { ($1.hex, $0 + 1) })
        var locations: [String: Reused] = [:]
        for (id, shipped) in reused {
            guard let holder = index[shipped.archive], let pack = UInt32(exactly: shipped.pack), shipped.offset >= 0,
                  shipped.offset <= ManifestV3.packPayload else { return .full(why: "the record does not read") }
            locations[id] = Reused(location: ItemLocation(holder: holder, pack: pack, offset: shipped.offset), size: shipped.size, sha256: shipped.sha256)
        }
        let sameAs = unchanged ? index[record.listArchive].flatMap { holder in
            [UInt8](hex: record.listRootSHA256, length: 32).map { (holder: holder, rootSHA256: $0) }
        } : nil
        if unchanged && sameAs == nil { return .full(why: "the record does not read") }
        return .incremental(IncrementalBase(dependsOn: dependsOn, reused: locations, sameAs: sameAs, sameAsItems: unchanged ? record.items : nil))
    }
}
