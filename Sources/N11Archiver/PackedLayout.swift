import Foundation
import N11Crypto
import N11Format
import N11System
import N11Vault

/// Where each item of a version 3 archive goes (DESIGN.md §8.2): items in ID order, cut into
/// manifest pages at content-defined boundaries, each page's items packed into packs of about
/// 64 MiB of payload. A pack never spans two pages, so a reader that streams the archive
/// meets a page before the packs of its items and holds one page at a time.
///
/// Decided in a first pass over the catalogue that keeps only a few numbers per page (not per
/// item: issue 34), before anything is written. While the archive is written, each page is
/// made again from the catalogue by `PackedPages` (the vault is locked, so it is the same
/// page) and checked against what this pass decided.
struct PackedLayout {
    /// A pack is closed once it holds this much payload, or at the end of its page.
    static let packTarget: Int64 = 64 << 20
    /// `create` reads and checks a pack's items a segment at a time, segments taking turns
    /// across the worker lanes, and seals the pack as they arrive. A segment ends after the
    /// item that brings it to this much payload: a lane is at most a few MiB ahead of the
    /// writer, so with a pack per lane only one lane worked at a time (issue 29).
    static let segmentTarget: Int64 = 1 << 20
    /// One item in this many ends a page, on average (DESIGN.md §8.2). A reader holds a
    /// record per page and libzip one per entry (a page and its packs), about 2 KB a page in
    /// all: at 4,096 items a page that is half a byte an item, so opening the archive of a
    /// vault ten times larger costs next to nothing more (issue 34). An incremental night
    /// writes again each page an item changed in (about 230 KB) and points at the others
    /// (DESIGN.md §8.3): larger pages would make a night of a few changes cost more.
    static let averagePageItems: UInt64 = 4096
    /// A page is cut at this many items when no ID has ended it before (FORMAT.md allows
    /// 16,384). Page lengths are spread as a geometric distribution, so the longest page of a
    /// vault grows with the number of pages until it meets the cap, and `create` holds whole
    /// pages at once (the page being written, and those the lanes' segments ahead are in:
    /// their records, item lists and plaintext): the more pages, the likelier that several
    /// long ones are held together. At a cap of 16,384 the peak RSS of `create` was 65.5–66.4
    /// MiB at 100,000 notes and 76.4–81.3 MiB at 1,000,000; at 8,192, 63.2–63.7 MiB at 100,000
    /// and 73.1 at 3,000,000 (1.15×, where issue 34 asks for 1.1×); at 4,096, 59.8–60.4 and
    /// 64.7 (1.07–1.08×; BENCHMARKS.md). A cut that is not the IDs' moves when an item before
    /// it in its run changes, so an incremental night then writes that run's pages again up to
    /// the next page an ID ends (DESIGN.md §8.3); pages average 2,589 items (4,096 ×
    /// (1 − e⁻¹)) instead of 4,096.
    static let pageItemsCap = 4096

    struct Pack: Equatable {
        let number: Int
        let payloadBytes: Int64
        let itemCount: Int
        /// How many segments its items are read in (`segmentTarget`).
        let segments: Int
    }

    struct Page: Equatable {
        /// Its place in the root's list.
        let number: Int
        let firstID: String
        let itemCount: Int
        let plaintextLength: Int
        /// The number its first pack has, or would have (a page whose items are all reused
        /// has none).
        let firstPack: Int
        let packs: [Pack]
        /// Its entry's number (`Manifest/{entry}.n11page`), or the number it would have: the
        /// archive's own pages are numbered from 0 in root order.
        let entry: Int
        /// An earlier archive's page this one is, pointed at instead of written (DESIGN.md §8.3).
        let reference: ReusablePages.Page?
    }

    /// A page made whole: its plaintext (the records are not kept: a few pages are in memory
    /// while packs are read ahead), and the items each of its packs holds.
    struct MadePage {
        let page: Page
        let plaintext: [UInt8]
        /// Its `PageFingerprint`, when the archive's pages are recorded (`Selection.archiveIDs`).
        let fingerprint: String?
        let packItems: [[ItemMetadata]]
        /// Per pack, the ranges of `packItems` its segments hold.
        let packSegments: [[Range<Int>]]
    }

    /// Which items an archive lists: the live ones of its compartments.
    struct Selection {
        let compartments: Set<Compartment>
        let now: Date
        let mode: ArchiveMode
        let packTarget: Int64
        /// A pack's items are read in segments of about this much payload (smaller in tests).
        var segmentTarget = PackedLayout.segmentTarget
        /// One item in this many ends a page on average (smaller in tests, to make many pages).
        var pageAverage = PackedLayout.averagePageItems
        /// A page is cut at this many items (smaller in tests).
        var pageCap = PackedLayout.pageItemsCap
        /// An incremental archive's items already shipped (DESIGN.md §8.3), looked up a page
        /// at a time.
        let reused: (any ReusedItems)?
        /// And the earlier pages it may point at.
        var pagesToReuse = ReusablePages.none
        /// The archive's own ID, then its `dependsOn` (hex): a record's holder number is an
        /// index here. Given when the archive's pages are recorded, to fingerprint them.
        var archiveIDs: [String]? = nil

        func lists(_ item: ItemMetadata) -> Bool { compartments.contains(item.compartment) && !item.isExpired(at: now) }
    }

    let pages: [Page]
    let itemCount: Int
    let plaintextBytes: Int64
    /// Items (and their plaintext bytes) packed into this archive, not reused.
    let newItems: Int
    let newBytes: Int64
    let skippedExpired: [String]
    /// Live items of the compartments the archive leaves out.
    let leftOut: [Compartment: Int]
    /// Secure archives: the compartment key every listed item is sealed under.
    let vaultKeys: [Compartment: [UInt8]]

    /// The first pass. Throws the first damaged record's error: a damaged record would
    /// silently be missing from the archive.
    init(vault: Vault, _ selection: Selection) throws {
        let vaultKeys = try Self.vaultKeys(vault, selection)
        var census = CatalogueCensus(compartments: selection.compartments, now: selection.now)
        var pages: [Page] = [], current: [ItemMetadata] = []
        var totals = (newItems: 0, newBytes: Int64(0)), nextPack = 0, nextEntry = 0
        var cut = try PageCut(average: selection.pageAverage, cap: selection.pageCap)
        func close() throws {
            let made = try Self.make(page: current, number: pages.count, firstPack: nextPack, entry: nextEntry, selection)
            pages.append(made.page)
            nextPack += made.page.packs.count
            if made.page.reference == nil { nextEntry += 1 }
            totals.newItems += made.packItems.reduce(0) { $0 + $1.count }
            totals.newBytes += made.packItems.joined().reduce(0) { $0 + $1.size }
            current.removeAll(keepingCapacity: true)
        }
        var damaged = false
        try vault.forEachItemInIDOrder { batch, damagedIDs in
            guard damagedIDs.isEmpty else { damaged = true; return false }
            for item in batch where census.lists(item) {
                if selection.mode == .secure {
                    precondition(item.keyID.isEmpty || item.keyID == vaultKeys[item.compartment], "an item under a retired key")
                }
                current.append(item)
                if try cut.ends(after: Self.idBytes(item)) { try close() }
            }
            return true
        }
        if damaged {
            // Keys another process rotated in meanwhile are tried first; what still does not
            // open is refused. If everything opens now, the pass is made again.
            if let error = try vault.damagedItemErrors().first { throw error }
            self = try Self(vault: vault, selection)
            return
        }
        if !current.isEmpty { try close() }
        guard pages.count <= ManifestV3.pages else { throw ArchiveError.tooLarge("\(pages.count) manifest pages (at most \(ManifestV3.pages))") }
        guard UInt64(nextPack) <= ManifestV3.packs else { throw ArchiveError.tooLarge("more than \(ManifestV3.packs) packs") }
        self.pages = pages
        (itemCount, plaintextBytes, newItems, newBytes) = (census.itemCount, census.plaintextBytes, totals.newItems, totals.newBytes)
        (skippedExpired, leftOut) = (census.skippedExpired, census.leftOut)
        self.vaultKeys = vaultKeys
    }

    /// An unchanged night's layout: no page and no pack (its root names the manifest it is
    /// the same as), and the counts of the walk that decided it was unchanged, made under
    /// the same lock of the vault. Nil when that walk met a damaged record: the first pass
    /// is then made, and throws its error.
    init?(unchanged census: CatalogueCensus, vault: Vault, _ selection: Selection) throws {
        guard !census.sawDamage, census.compartments == selection.compartments, census.now == selection.now else { return nil }
        pages = []
        (itemCount, plaintextBytes, newItems, newBytes) = (census.itemCount, census.plaintextBytes, 0, 0)
        (skippedExpired, leftOut) = (census.skippedExpired, census.leftOut)
        vaultKeys = try Self.vaultKeys(vault, selection)
    }

    /// A vault opened for writing has finished any rotation, so every item is under its
    /// compartment's current key: the archive finds them after a later rotation.
    private static func vaultKeys(_ vault: Vault, _ selection: Selection) throws -> [Compartment: [UInt8]] {
        guard selection.mode == .secure else { return [:] }
        var keys: [Compartment: [UInt8]] = [:]
        for compartment in selection.compartments { keys[compartment] = try vault.keyStore.currentKeyID(for: compartment) }
        return keys
    }

    /// One page of `items` (sorted by ID, 1…16,384): its records, and its packs from
    /// `firstPack` on. An item in `reused`, unchanged, keeps its location in the archive that
    /// holds it and is packed nowhere here. A page whose items are all reused and whose
    /// fingerprint is that of a page in `pagesToReuse` (by first ID) is that page.
    static func make(page items: [ItemMetadata], number: Int, firstPack: Int, entry: Int, _ selection: Selection) throws -> MadePage {
        var writer = ManifestPage.Writer(count: items.count), packs: [Pack] = [], packItems: [[ItemMetadata]] = []
        let fingerprint = try selection.archiveIDs.map { _ in try PageFingerprint() }
        func append(_ item: ItemMetadata, at location: ItemLocation) throws {
            writer.append(try record(item, location: location))
            if let fingerprint, let ids = selection.archiveIDs {
                fingerprint.add(item, pack: location.pack, offset: location.offset, heldBy: ids[location.holder])
            }
        }
        var packSegments: [[Range<Int>]] = []
        var current: [ItemMetadata] = [], bytes: Int64 = 0
        let reused = try selection.reused?.forPage(items) ?? [:]
        func closePack() {
            let segments = Self.segments(of: current, mode: selection.mode, target: selection.segmentTarget)
            packs.append(Pack(number: firstPack + packs.count, payloadBytes: bytes, itemCount: current.count, segments: segments.count))
            packItems.append(current)
            packSegments.append(segments)
            (current, bytes) = ([], 0)
        }
        for item in items {
            if let shipped = reused[item.id], shipped.size == item.size, shipped.sha256 == item.sha256 {
                try append(item, at: shipped.location)
                continue
            }
            let payload = Self.payload(of: item, mode: selection.mode)
            if !current.isEmpty && bytes + payload > selection.packTarget { closePack() }
            try append(item, at: ItemLocation(holder: 0, pack: UInt32(truncatingIfNeeded: firstPack + packs.count), offset: bytes))
            current.append(item)
            bytes += payload
        }
        if !current.isEmpty { closePack() }
        let plaintext = writer.bytes, firstID = items.first?.id ?? ""
        let print = try fingerprint?.finish()
        let reference = selection.pagesToReuse.byFirstID[firstID].flatMap { candidate in
            packs.isEmpty && candidate.recorded.itemCount == Int64(items.count) && candidate.recorded.fingerprint == print ? candidate : nil
        }
        let page = Page(number: number, firstID: firstID, itemCount: items.count, plaintextLength: plaintext.count,
                        firstPack: firstPack, packs: packs, entry: entry, reference: reference)
        return MadePage(page: page, plaintext: plaintext, fingerprint: print, packItems: packItems, packSegments: packSegments)
    }

    /// An item's bytes in its pack: its plaintext (portable), or its vault file (secure).
    static func payload(of item: ItemMetadata, mode: ArchiveMode) -> Int64 {
        mode == .portable ? item.size : item.size + FormatLimits.vaultFileOverhead
    }

    /// A pack's items cut into segments: each ends after the item that brings it to
    /// `target` bytes of payload, or at the pack's end. At least one for a pack.
    static func segments(of items: [ItemMetadata], mode: ArchiveMode, target: Int64 = segmentTarget) -> [Range<Int>] {
        var segments: [Range<Int>] = [], start = 0, bytes: Int64 = 0
        for (index, item) in items.enumerated() {
            bytes += payload(of: item, mode: mode)
            if bytes >= target {
                segments.append(start..<index + 1)
                (start, bytes) = (index + 1, 0)
            }
        }
        if start < items.count || segments.isEmpty { segments.append(start..<items.count) }
        return segments
    }

    /// Whether a page ends after the item `id`: a property of the ID alone, so adding or
    /// removing an item moves no boundary but its own page's. `average` is a power of two.
    static func endsPage(after id: [UInt8], average: UInt64 = averagePageItems) throws -> Bool {
        endsPage(digest: try SHA256Digest.hash(pageContext + id), average: average)
    }

    static let pageContext = Array("n11archive/v3/page".utf8)

    /// The same, given `SHA-256(pageContext ‖ id)`.
    static func endsPage(digest: [UInt8], average: UInt64) -> Bool {
        precondition(average >= 2 && average & (average - 1) == 0, "a page average of \(average)")
        let leading = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return leading < (UInt64(1) << 63) / (average / 2)   // 2^64 / 4096 = 2^52
    }

    private static func idBytes(_ item: ItemMetadata) throws -> [UInt8] {
        guard let id = ManifestRecord.idBytes(item.id) else { throw FormatError.invalidManifest("item ID '\(item.id)'") }
        return id
    }

    private static func record(_ item: ItemMetadata, location: ItemLocation) throws -> ManifestRecord {
        guard let digest = [UInt8](hex: item.sha256, length: 32) else { throw FormatError.invalidManifest("item \(item.id) digest") }
        // Never write what a reader refuses: a time outside years 0000–9999.
        let created = Timestamp.milliseconds(item.created), expires = item.expires.map(Timestamp.milliseconds)
        for time in [created] + (expires.map { [$0] } ?? []) where !ManifestV3.itemTimes.contains(time) {
            throw ArchiveError.tooLarge("item \(item.id) is dated outside the years 0000–9999")
        }
        return ManifestRecord(id: try idBytes(item), kind: item.kind, compartment: item.compartment, name: item.name,
                              created: created, expires: expires, size: item.size, sha256: digest, location: location)
    }

    /// The root that lists every page: the archive's own, with their SHA-256 by entry
    /// number (all zero for the length alone: a digest is 32 bytes whatever it is), and the
    /// earlier archives' pages it points at, as their roots described them.
    func root(pageDigests: [[UInt8]]) throws -> ManifestRoot {
        let descriptors = try pages.map { page in
            let firstID = ManifestRecord.idBytes(page.firstID) ?? []
            if let reference = page.reference {
                guard let sha256 = [UInt8](hex: reference.recorded.sha256, length: 32) else {
                    throw FormatError.invalidManifest("the record's page \(reference.recorded.firstID)")
                }
                return PageDescriptor(firstID: firstID, itemCount: page.itemCount, holder: reference.holder, page: Int(reference.recorded.page),
                                      plaintextLength: Int(reference.recorded.length), sha256: sha256)
            }
            return PageDescriptor(firstID: firstID, itemCount: page.itemCount, holder: 0, page: page.entry, plaintextLength: page.plaintextLength,
                                  sha256: pageDigests.indices.contains(page.entry) ? pageDigests[page.entry] : [UInt8](repeating: 0, count: 32))
        }
        return .pages(.init(vaultKeys: vaultKeys, itemCount: Int64(itemCount), plaintextBytes: plaintextBytes, pages: descriptors))
    }
}

/// The second pass: each page made again from the catalogue when the archive writer or a
/// pack worker first needs it, and let go once its page entry and all its packs were taken,
/// so that a few pages are in memory at a time. Thread-safe: libzip's thread takes pages,
/// the pack workers take packs, and the catalogue is read by one of them at a time.
final class PackedPages: @unchecked Sendable {
    private let vault: Vault
    private let layout: PackedLayout
    private let selection: PackedLayout.Selection
    private let lock = NSLock()
    /// Made pages, and how many of their parts (the page entry, each pack's segments) are still to be taken.
    private var made: [Int: (page: PackedLayout.MadePage, parts: Int)] = [:]
    private let pageOfPack: [Int]
    /// For tests: how many times a page was made, and how many are held now (each page is
    /// made once and let go when its last part is taken).
    private(set) var pagesMade = 0
    var pagesHeld: Int { lock.withLock { made.count } }

    init(vault: Vault, layout: PackedLayout, selection: PackedLayout.Selection) {
        self.vault = vault
        self.layout = layout
        self.selection = selection
        pageOfPack = layout.pages.flatMap { page in page.packs.map { _ in page.number } }
    }

    /// Page `n`'s records and plaintext (once).
    func takePage(_ n: Int) throws -> PackedLayout.MadePage { try take(page: n) { $0 } }

    /// The items segment `segment` of pack `n` holds, in order (once).
    func takeSegment(pack n: Int, segment: Int) throws -> ArraySlice<ItemMetadata> {
        let pageNumber = pageOfPack[n]
        return try take(page: pageNumber) { made in
            let k = n - layout.pages[pageNumber].firstPack
            return made.packItems[k][made.packSegments[k][segment]]
        }
    }

    private func take<T>(page n: Int, _ part: (PackedLayout.MadePage) -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        let entry = try made[n] ?? (make(n), 1 + layout.pages[n].packs.reduce(0) { $0 + $1.segments })
        made[n] = entry.parts > 1 ? (entry.page, entry.parts - 1) : nil
        return part(entry.page)
    }

    private func make(_ n: Int) throws -> PackedLayout.MadePage {
        pagesMade += 1
        let planned = layout.pages[n]
        var items: [ItemMetadata] = []
        items.reserveCapacity(planned.itemCount)
        var damaged: [String] = []
        // Most rows are the page's: a batch of its size seldom opens a record more than it needs.
        try vault.forEachItemInIDOrder(from: planned.firstID, batchSize: planned.itemCount) { batch, damagedIDs in
            damaged += damagedIDs
            for item in batch where selection.lists(item) {
                items.append(item)
                if items.count == planned.itemCount { return false }
            }
            return damaged.isEmpty
        }
        if let id = damaged.first {
            throw try vault.damagedItemErrors().first ?? VaultError.itemDamaged(id: id, path: Path.join(vault.path, "Catalogue.sqlite"))
        }
        let page = try PackedLayout.make(page: items, number: n, firstPack: planned.firstPack, entry: planned.entry, selection)
        // The vault is locked for the whole run: a page that comes out otherwise is a bug.
        guard page.page == planned else {
            throw SystemError("the vault changed while the archive was written (manifest page \(n) came out otherwise than planned); nothing was written, run create again",
                              path: vault.path, errno: EAGAIN)
        }
        return page
    }
}
