import Foundation
import N11Crypto
import N11Format
import N11Vault

/// Where each item of a version 3 full archive goes (DESIGN.md §8.2), decided from the
/// catalogue alone before anything is written: items in ID order, cut into manifest pages
/// at content-defined boundaries, each page's items packed into packs of about 64 MiB of
/// payload. A pack never spans two pages, so a reader that streams the archive meets a
/// page before the packs of its items and holds one page at a time.
struct PackedLayout {
    struct Pack {
        let number: Int
        /// Indices into `items`, ascending (an incremental archive's skip the reused ones).
        let items: [Int]
        let payloadBytes: Int64
    }

    struct Page {
        let number: Int
        let items: Range<Int>
        let packs: [Pack]
        /// The page's plaintext (`ManifestPage`).
        let plaintext: [UInt8]
    }

    /// A pack is closed once it holds this much payload, or at the end of its page.
    static let packTarget: Int64 = 64 << 20
    /// One item in this many ends a page, on average (DESIGN.md §8.2).
    static let averagePageItems: UInt64 = 512

    let items: [ItemMetadata]
    let pages: [Page]

    /// No pages and no packs: an unchanged night's incremental archive (its root names the
    /// manifest it is the same as).
    static let empty = PackedLayout(items: [], pages: [])

    private init(items: [ItemMetadata], pages: [Page]) {
        self.items = items
        self.pages = pages
    }

    /// `items` in any order; they are sorted by ID here. An item in `reused` (an incremental
    /// archive's, by item ID) is listed with that location, in an archive it depends on, and
    /// packed nowhere here; a page whose items are all reused has no pack.
    init(items unsorted: [ItemMetadata], mode: ArchiveMode, packTarget: Int64 = packTarget,
         reused: [String: IncrementalBase.Reused] = [:]) throws {
        let keyed = try unsorted.map { item -> ([UInt8], ItemMetadata) in
            guard let id = ManifestRecord.idBytes(item.id) else { throw FormatError.invalidManifest("item ID '\(item.id)'") }
            return (id, item)
        }.sorted { $0.0.lexicographicallyPrecedes($1.0) }
        items = keyed.map(\.1)
        var pages: [Page] = []
        var start = 0, packNumber = 0
        for index in keyed.indices {
            let ends = try Self.endsPage(after: keyed[index].0)
            guard ends || index == keyed.count - 1 || index - start + 1 == ManifestV3.pageItems else { continue }
            let range = start..<(index + 1)
            var packs: [Pack] = [], records: [ManifestRecord] = []
            var packItems: [Int] = [], packBytes: Int64 = 0
            for i in range {
                let item = keyed[i].1
                if let shipped = reused[item.id], shipped.size == item.size, shipped.sha256 == item.sha256 {
                    records.append(try Self.record(item, id: keyed[i].0, location: shipped.location))
                    continue
                }
                let payload = mode == .portable ? item.size : item.size + FormatLimits.vaultFileOverhead
                if !packItems.isEmpty && packBytes + payload > packTarget {
                    packs.append(Pack(number: packNumber, items: packItems, payloadBytes: packBytes))
                    packNumber += 1
                    (packItems, packBytes) = ([], 0)
                }
                packItems.append(i)
                records.append(try Self.record(item, id: keyed[i].0, location: ItemLocation(holder: 0, pack: UInt32(truncatingIfNeeded: packNumber), offset: packBytes)))
                packBytes += payload
            }
            if !packItems.isEmpty {
                packs.append(Pack(number: packNumber, items: packItems, payloadBytes: packBytes))
                packNumber += 1
            }
            guard UInt64(packNumber) <= ManifestV3.packs else { throw ArchiveError.tooLarge("more than \(ManifestV3.packs) packs") }
            pages.append(Page(number: pages.count, items: range, packs: packs, plaintext: ManifestPage.serialized(records)))
            start = index + 1
        }
        guard pages.count <= ManifestV3.pages else { throw ArchiveError.tooLarge("\(pages.count) manifest pages (at most \(ManifestV3.pages))") }
        self.pages = pages
    }

    /// Whether a page ends after the item `id`: a property of the ID alone, so adding or
    /// removing an item moves no boundary but its own page's.
    static func endsPage(after id: [UInt8]) throws -> Bool {
        let digest = try SHA256Digest.hash(Array("n11archive/v3/page".utf8) + id)
        let leading = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return leading < (UInt64(1) << 63) / (averagePageItems / 2)   // 2^64 / 512 = 2^55
    }

    private static func record(_ item: ItemMetadata, id: [UInt8], location: ItemLocation) throws -> ManifestRecord {
        guard let digest = [UInt8](hex: item.sha256, length: 32) else { throw FormatError.invalidManifest("item \(item.id) digest") }
        // Never write what a reader refuses: a time outside years 0000–9999.
        let created = Timestamp.milliseconds(item.created), expires = item.expires.map(Timestamp.milliseconds)
        for time in [created] + (expires.map { [$0] } ?? []) where !ManifestV3.itemTimes.contains(time) {
            throw ArchiveError.tooLarge("item \(item.id) is dated outside the years 0000–9999")
        }
        return ManifestRecord(id: id, kind: item.kind, compartment: item.compartment, name: item.name,
                              created: created, expires: expires, size: item.size, sha256: digest, location: location)
    }

    /// The root that lists every page as held by this archive.
    func root(vaultKeys: [Compartment: [UInt8]]) throws -> ManifestRoot {
        let descriptors = try pages.map { page in
            PageDescriptor(firstID: ManifestRecord.idBytes(items[page.items.lowerBound].id) ?? [], itemCount: page.items.count,
                           holder: 0, page: page.number, plaintextLength: page.plaintext.count,
                           sha256: try SHA256Digest.hash(page.plaintext))
        }
        return .pages(.init(vaultKeys: vaultKeys, itemCount: Int64(items.count), plaintextBytes: items.reduce(0) { $0 + $1.size },
                            pages: descriptors))
    }
}
