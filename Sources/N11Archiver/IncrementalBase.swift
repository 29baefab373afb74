import Foundation
import N11Format
import N11System
import N11Vault

/// What an incremental archive builds on (DESIGN.md §8.3), decided from this home's record of
/// what it shipped to the destination and what the destination holds now, before anything
/// is written: the archives it depends on, and for each item already there, where.
public struct IncrementalBase {
    /// Sorted, unique, at most `ManifestV3.dependencies`.
    public let dependsOn: [[UInt8]]
    /// Where the items already shipped are, looked up a page at a time (DESIGN.md §8.3): the
    /// location in `dependsOn[holder − 1]`'s packs, and the size and SHA-256 the item had
    /// there (an item changed since is packed again, whatever the record says).
    let reused: any ReusedItems

    public struct Reused: Sendable {
        public let location: ItemLocation
        public let size: Int64
        public let sha256: String
    }
    /// An unchanged night: the manifest it is the same as (`dependsOn[holder − 1]`'s root).
    public let sameAs: (holder: Int, rootSHA256: [UInt8])?
    /// The last manifest's pages that the night points at instead of writing them again:
    /// those whose items (all already shipped) and records are the same now.
    let pages: ReusablePages
    /// What the walk that decided saw of the vault (`ArchiveBackup`), so that an unchanged
    /// night walks the catalogue once.
    var census: CatalogueCensus? = nil

    /// The base, or why the night is a full archive.
    public enum Decision {
        case incremental(IncrementalBase)
        case full(why: String)
    }

    /// Whether a compartment both key lists name (`vault:<hex>,fade:<hex>`: a secure
    /// night's compartment key IDs, as the record keeps them) has another key now: the items
    /// held elsewhere would not open under this archive's `vaultKeys`. A compartment only one
    /// of them names is no rotation: a night of other compartments than the last lists items
    /// the record does not hold, and ships them anew. A list that does not parse (a name that
    /// is no compartment, an ID that is not 16 bytes of hex, a compartment twice), or one empty
    /// where the other is not (a secure night lists one compartment at least, a portable one
    /// none: one of them was damaged), counts as rotated: the night is full.
    static func keysRotated(recorded: String, now: String) -> Bool {
        func parse(_ text: String) -> [Compartment: [UInt8]]? {
            var keys: [Compartment: [UInt8]] = [:]
            for part in text.split(separator: ",", omittingEmptySubsequences: false) {
                let halves = part.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                guard halves.count == 2, let compartment = Compartment(rawValue: String(halves[0])),
                      let id = [UInt8](hex: String(halves[1]), length: 16),
                      keys.updateValue(id, forKey: compartment) == nil else { return nil }
            }
            return keys
        }
        if recorded.isEmpty && now.isEmpty { return false }
        guard !recorded.isEmpty, !now.isEmpty, let before = parse(recorded), let after = parse(now) else { return true }
        return before.contains { compartment, key in after[compartment].map { $0 != key } ?? false }
    }

    /// Decides. `record`: the destination's state (nil: none); `shipped`: its items from an
    /// ID through an ID (nil: to the last), in ID order; `pages`: the pages of its last
    /// manifest, by first ID; `objects`: what the destination holds now; `items`: walks the
    /// live items the archive will list, in ID order; `cut`: where the archive's pages will
    /// end; `fullEvery`: the oldest a dependency may be (so prune can free space). The walks
    /// go side by side, holding one item of each and one page: memory does not grow with the
    /// vault (issue 34).
    public static func decide(record: ShipmentRecord.Destination?, shipped: @escaping ShippedItems.Walk, pages recorded: [ShipmentRecord.Page],
                              objects: [StoredObject], items: ((ItemMetadata) throws -> Void) throws -> Void,
                              mode: ArchiveMode, access: String, vaultKeys: String, now: Date, fullEvery: TimeInterval,
                              pageAverage: UInt64, pageCap: Int) throws -> Decision {
        guard let record else { return .full(why: "there is no record of what this home has shipped there") }
        guard record.mode == mode else { return .full(why: "the last archive there was \(record.mode.rawValue)") }
        guard record.access == access else { return .full(why: "the passwords or recipients it opens with changed since the last archive") }
        guard !keysRotated(recorded: record.vaultKeys, now: vaultKeys) else { return .full(why: "the vault's keys were rotated since the last archive") }
        let cursor = try shipped("", nil)
        var pending = try cursor.next()
        var counts = (items: 0, reused: 0, recorded: 0), unreadable = false
        var needed = Set<String>()
        // The night's pages as the layout will cut them; one whose items are all reused and
        // whose fingerprint is that of the recorded page with its first ID may be pointed at.
        // (A row that could not describe a page is never pointed at: the page is written again.)
        let recordedByFirstID = Dictionary(recorded.filter(\.describesAPage).map { ($0.firstID, $0) }, uniquingKeysWith: { first, _ in first })
        var cut = try PageCut(average: pageAverage, cap: pageCap)
        var page: (first: String, items: Int64, fingerprint: PageFingerprint?)? = nil
        var matchingPages: [ShipmentRecord.Page] = [], nightPages = 0
        func closePage() throws {
            defer { page = nil }
            nightPages += 1
            guard let (first, count, fingerprint) = page, let fingerprint, let match = recordedByFirstID[first],
                  match.itemCount == count, try fingerprint.finish() == match.fingerprint else { return }
            matchingPages.append(match)
        }
        try items { item in
            counts.items += 1
            if page == nil { page = (item.id, 0, recordedByFirstID[item.id] == nil ? nil : try PageFingerprint()) }
            page?.items += 1
            // Recorded items no longer in the vault come before it (IDs compare as bytes, in
            // the catalogue's and the record's order alike).
            while let row = pending, row.id < item.id {
                counts.recorded += 1
                pending = try cursor.next()
            }
            var shippedAs: ShipmentRecord.Item? = nil
            if let row = pending, row.id == item.id {
                counts.recorded += 1
                pending = try cursor.next()
                if row.item.sha256 == item.sha256, row.item.size == item.size { shippedAs = row.item }
            }
            if let shippedAs {
                counts.reused += 1
                needed.insert(shippedAs.archive)
                if let pack = UInt32(exactly: shippedAs.pack), shippedAs.offset >= 0, shippedAs.offset <= ManifestV3.packPayload {
                    page?.fingerprint?.add(item, pack: pack, offset: shippedAs.offset, heldBy: shippedAs.archive)
                } else {
                    unreadable = true
                }
            } else {
                page?.fingerprint = nil
            }
            guard let id = ManifestRecord.idBytes(item.id) else { throw FormatError.invalidManifest("item ID '\(item.id)'") }
            if try cut.ends(after: id) { try closePage() }
        }
        if page != nil { try closePage() }
        while pending != nil {
            counts.recorded += 1
            pending = try cursor.next()
        }
        if unreadable { return .full(why: "the record does not read") }
        let present = Dictionary(objects.map { ($0.name, $0.size) }, uniquingKeysWith: { first, _ in first })
        /// Why an archive cannot be built on, or nil if it can.
        func unusable(_ id: String) -> String? {
            guard let archive = record.archives[id], present[archive.name] == archive.size else {
                return "archive \(id) (\(record.archives[id]?.name ?? "?")), which holds items of the last one, is no longer there"
            }
            // Made "later" than now: a clock was wrong then (or is now). A reader refuses a
            // dependency newer than the archive, so never build on one.
            if archive.created > now {
                return "\(archive.name), which it would build on, is dated in the future (a clock was wrong)"
            }
            if archive.created < now.addingTimeInterval(-fullEvery) {
                return "the oldest archive it would need (\(archive.name)) is older than --full-every"
            }
            return nil
        }
        for id in needed { if let why = unusable(id) { return .full(why: why) } }
        // A page whose archive cannot be built on is written again instead.
        var reusable = matchingPages.filter { unusable($0.archive) == nil }
        // Unchanged: the same items with the same contents and every page the same (a name or
        // time changed under the same content is a change). A record without its pages (an
        // older build wrote it last) cannot tell: that night writes its page list.
        var unchanged = counts.reused == counts.items && counts.recorded == counts.items
            && record.pagesRecorded && reusable.count == nightPages && nightPages == recorded.count
        // A "same as" root needs the list's archive too; without it (gone, or one archive past
        // the bound) the night writes a page list pointing at the same pages instead.
        if unchanged && (unusable(record.listArchive) != nil
                         || needed.union(reusable.map(\.archive)).union([record.listArchive]).count > ManifestV3.dependencies) {
            unchanged = false
        }
        // The bound counts archives that hold only pages too. Past it, those pages are written
        // again (a few hundred KB each) rather than the night made full: only the items'
        // archives make a night full.
        if !unchanged && needed.union(reusable.map(\.archive)).count > ManifestV3.dependencies {
            reusable = reusable.filter { needed.contains($0.archive) }
        }
        if unchanged { needed.insert(record.listArchive) }
        needed.formUnion(reusable.map(\.archive))
        guard needed.count <= ManifestV3.dependencies else { return .full(why: "it would need more than \(ManifestV3.dependencies) archives") }
        let dependsOn = needed.compactMap { [UInt8](hex: $0, length: 16) }.sorted { $0.lexicographicallyPrecedes($1) }
        let holders = Dictionary(uniqueKeysWithValues: dependsOn.enumerated().map { ($1.hex, $0 + 1) })
        let sameAs = unchanged ? holders[record.listArchive].flatMap { holder in
            [UInt8](hex: record.listRootSHA256, length: 32).map { (holder: holder, rootSHA256: $0) }
        } : nil
        if unchanged && sameAs == nil { return .full(why: "the record does not read") }
        let pagesToReuse = ReusablePages(byFirstID: Dictionary(reusable.compactMap { page in
            holders[page.archive].map { (page.firstID, ReusablePages.Page(holder: $0, recorded: page)) }
        }, uniquingKeysWith: { first, _ in first }))
        return .incremental(IncrementalBase(dependsOn: dependsOn, reused: RecordedItems(shipped: shipped, holders: holders), sameAs: sameAs,
                                            pages: pagesToReuse))
    }
}

extension ShipmentRecord.Page {
    /// Whether the row could be a page's descriptor (FORMAT.md's bounds): a night points a
    /// root at it only then.
    var describesAPage: Bool {
        (0..<Int64(ManifestV3.pages)).contains(page) && (1...Int64(ManifestV3.pageItems)).contains(itemCount)
            && (1...Int64(ManifestV3.pageBytes)).contains(length) && [UInt8](hex: sha256, length: 32) != nil
            && [UInt8](hex: archive, length: 16) != nil && fingerprint.count == 64 && ManifestRecord.idBytes(firstID) != nil
    }
}

/// What a destination's record holds, one item at a time in ID order.
public protocol ShippedItems: AnyObject {
    /// The items from an ID through an ID (nil: to the last).
    typealias Walk = (_ from: String, _ through: String?) throws -> any ShippedItems
    func next() throws -> (id: String, item: ShipmentRecord.Item)?
}

extension ShipmentRecord.ItemCursor: ShippedItems {}

/// The record's items of one page (`items` sorted by ID): those that can be reused, by ID.
protocol ReusedItems {
    func forPage(_ items: [ItemMetadata]) throws -> [String: IncrementalBase.Reused]
}

/// The items shipped before, read from the record a page's ID range at a time: `shipped`
/// walks from an ID (the page's first) on, in ID order.
struct RecordedItems: ReusedItems {
    let shipped: ShippedItems.Walk
    /// Archive (hex ID) → its number in the night's `dependsOn` (from 1).
    let holders: [String: Int]

    func forPage(_ items: [ItemMetadata]) throws -> [String: IncrementalBase.Reused] {
        guard let first = items.first?.id, let last = items.last?.id else { return [:] }
        let rows = try shipped(first, last)
        var found: [String: IncrementalBase.Reused] = [:]
        while let (id, row) = try rows.next() {
            // An archive the night does not depend on, or a place no pack has: packed anew.
            guard let holder = holders[row.archive], let pack = UInt32(exactly: row.pack), row.offset >= 0,
                  row.offset <= ManifestV3.packPayload else { continue }
            found[id] = .init(location: ItemLocation(holder: holder, pack: pack, offset: row.offset), size: row.size, sha256: row.sha256)
        }
        return found
    }
}
