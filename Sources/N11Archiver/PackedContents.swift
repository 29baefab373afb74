import Foundation
import N11Container
import N11Crypto
import N11Format
import N11System

/// A version 3 archive's entries (DESIGN.md §8.2), checked against the layout before any of
/// them is read: `header.json`, `header.mac`, `header.sig` when signed, then each manifest
/// page followed by the packs of its items (pages and packs numbered from 0 without a gap),
/// and `Manifest/root.n11` last. Nothing else, nothing twice.
struct PackedEntries {
    let signatureEntry: ZipEntryInfo?
    /// By page number.
    let pages: [Int: ZipEntryInfo]
    /// By pack number.
    let packs: [Int: ZipEntryInfo]
    /// For each pack, the page whose entry comes before it (not known in a salvage).
    let pageOfPack: [Int: Int]
    /// Missing only in a salvage (a copy cut short loses it first): `PackedContents` then
    /// reads the pages that are there without it.
    let root: ZipEntryInfo?
    /// Found by name for a salvage: packs may be missing, and what the layout does not name
    /// is ignored; the header and its MAC must still be there, and the root or else page 0.
    let salvaging: Bool

    init(_ entries: [ZipEntryInfo], salvaging: Bool = false) throws(FormatError) {
        self.salvaging = salvaging
        guard entries.count >= 3, entries[0].name == EntryName.header else { throw .notAnArchive("first entry is not \(EntryName.header)") }
        guard entries[1].name == EntryName.headerMAC else { throw .invalidEntryName(entries[1].name) }
        var next = 2
        if entries[2].name == EntryName.headerSignature {
            guard entries[2].size == Int64(FormatLimits.signatureBytes) else { throw .invalidHeader("\(EntryName.headerSignature) of \(entries[2].size) bytes") }
            signatureEntry = entries[2]
            next = 3
        } else {
            signatureEntry = nil
        }
        var pages: [Int: ZipEntryInfo] = [:], packs: [Int: ZipEntryInfo] = [:], pageOfPack: [Int: Int] = [:]
        var root: ZipEntryInfo?
        for entry in entries[next...] {
            if salvaging {
                // The first entry of a name is kept (FORMAT.md §1.1); anything else is ignored.
                if entry.name == EntryName.manifestRoot { root = root ?? entry }
                if let n = EntryName.number(of: entry.name, prefix: "Manifest/", suffix: ".n11page"), pages[n] == nil { pages[n] = entry }
                if let n = EntryName.number(of: entry.name, prefix: "Packs/", suffix: ".n11pack"), packs[n] == nil { packs[n] = entry }
                continue
            }
            guard root == nil else { throw .invalidEntryName(entry.name) }
            if entry.name == EntryName.page(pages.count) {
                pages[pages.count] = entry
            } else if entry.name == EntryName.pack(packs.count), !pages.isEmpty {
                pageOfPack[packs.count] = pages.count - 1
                packs[packs.count] = entry
            } else if entry.name == EntryName.manifestRoot {
                root = entry
            } else {
                throw .invalidEntryName(entry.name)
            }
            guard FormatLimits.payloadLength(sealedLength: entry.size) != nil else {
                throw .invalidManifest("entry '\(entry.name)' of \(entry.size) bytes is no sealed stream")
            }
        }
        // The root is the archive's last entry: the first thing a copy cut short loses.
        if root == nil && !(salvaging && pages[0] != nil) {
            throw .invalidManifest("there is no \(EntryName.manifestRoot) (the archive's last entry: is it a copy cut short?)")
        }
        if let root, FormatLimits.payloadLength(sealedLength: root.size) == nil {
            throw .invalidManifest("entry '\(root.name)' of \(root.size) bytes is no sealed stream")
        }
        guard pages.count <= ManifestV3.pages, UInt64(packs.count) <= ManifestV3.packs else {
            throw .limitExceeded("\(pages.count) pages and \(packs.count) packs")
        }
        self.pages = pages
        self.packs = packs
        self.pageOfPack = pageOfPack
        self.root = root
    }
}

/// An archive that an incremental one depends on (DESIGN.md §8.3), opened only as far as its
/// pages, root and packs need: its reader (checked to be the archive its ID names) and its
/// content key, from the user's own secrets.
final class OpenedDependency {
    let reader: ArchiveReader
    let contentKey: SecureBytes
    let entries: PackedEntries

    init(reader: ArchiveReader, contentKey: SecureBytes, entries: PackedEntries) {
        self.reader = reader
        self.contentKey = contentKey
        self.entries = entries
    }
}

/// What a version 3 archive's authenticated manifest says: every item, and where its payload
/// is. Opening reads the root and every page once (each checked against its descriptor) and
/// checks that the items fill each pack exactly, in order, with nothing left over, keeping a
/// few numbers per page and per pack, not per item (issue 34). Items are then read a page at
/// a time (`item(at:)`), each page checked again against the root's SHA-256 for it, so what
/// is read is what was checked.
///
/// An incremental archive's root may be another archive's ("the same manifest as"), a page
/// may be held by one of its dependencies, and an item's payload may be in a dependency's
/// pack. Holders are numbered per archive (0 itself, k its `dependsOn[k − 1]`); everything
/// is renumbered to this archive's `dependsOn`, which must name every archive reached (no
/// chains: FORMAT.md §10.4, §10.6). An item held by a dependency is checked against this
/// archive's manifest (size, SHA-256) when it is read.
final class PackedContents: @unchecked Sendable {
    /// Per archive (0 this one, k its `dependsOn[k − 1]`): its packs, entry key material and
    /// reader; nil for a dependency missing in a salvage.
    let archives: [Holder?]
    let itemCount: Int
    let plaintextBytes: Int64
    /// Secure archives: the compartment key IDs (FORMAT.md §10.6).
    let vaultKeys: [Compartment: [UInt8]]?

    struct Holder {
        let reader: ArchiveReader
        let packs: [Int: ZipEntryInfo]
        let contentKey: SecureBytes
        var header: ArchiveHeader { reader.header }
    }

    /// A page of the list: which archive holds it, its entry there, what the root says of it,
    /// and the manifest position of its first item.
    private struct Page {
        /// Its place in the root's list (what messages call it).
        let number: Int
        let holder: Int
        let entry: ZipEntryInfo
        let descriptor: PageDescriptor
        let firstIndex: Int
    }

    private let pages: [Page]
    /// This archive's packs that hold exactly their items: the position of each one's last item.
    private let packEnds: [Int: Int]
    /// A salvage: items whose archive is missing, or whose place there no pack has.
    private let unplaced: Set<Int>
    /// Per archive: its `dependsOn` numbers in this archive's numbering.
    private let renumbering: [[Int]]
    private let mode: ArchiveMode
    private let dependsOn: [[UInt8]]
    private let archiveName: String

    /// Pages read again, the few used last; the archive's reader thread and the caller's
    /// take items at once.
    private let lock = NSLock()
    /// Kept as checked plaintext (about 90 bytes an item); an item is made from its record
    /// when it is asked for.
    private var loaded: [Int: ParsedPage] = [:]
    private var lastUsed: [Int] = []
    /// Enough for the two threads that read and a little going back; a page holds 4,096
    /// items on average (PackedLayout), about 90 bytes each as plaintext.
    static let pagesKept = 4

    /// With `salvaging` (a salvage, FORMAT.md §10.8), a page that is missing or does not read
    /// is left out (`lostPages`) instead of stopping the reading: the other pages authenticate
    /// on their own, and a pack never holds the items of two pages.
    init(reading entries: PackedEntries, of reader: ArchiveReader, contentKey: SecureBytes,
         dependencies: [OpenedDependency?] = [], salvaging: Bool = false) throws {
        let header = reader.header
        precondition(dependencies.count == header.dependsOn.count)
        let own = Holder(reader: reader, packs: entries.packs, contentKey: contentKey)
        self.own = own
        var archives: [Holder?] = [own]
        for dependency in dependencies {
            archives.append(dependency.map { Holder(reader: $0.reader, packs: $0.entries.packs, contentKey: $0.contentKey) })
        }
        self.archives = archives
        mode = header.mode
        dependsOn = header.dependsOn
        archiveName = reader.name
        let pagesOf: [[Int: ZipEntryInfo]?] = [entries.pages] + dependencies.map { $0?.entries.pages }
        let rootOf: [ZipEntryInfo?] = [entries.root] + dependencies.map { $0?.entries.root }
        func present(_ index: Int, _ what: String) throws -> Holder {
            guard let holder = archives[index] else {
                throw FormatError.invalidManifest("\(what) is in archive \(header.dependsOn[index - 1].hex), which is missing")
            }
            return holder
        }
        // Each archive's numbering in this archive's; 0 for an archive this one's header does
        // not list, refused where a page or item is found to be held by it.
        self.renumbering = [[]] + archives.dropFirst().map { holder in
            (holder?.header.dependsOn ?? []).map { id in header.dependsOn.firstIndex(of: id).map { $0 + 1 } ?? 0 }
        }
        let renumbering = self.renumbering

        // The page list: this archive's root, or the one its root names; in a salvage of a
        // copy cut short before its root, the archive's own pages that are there.
        var listHolder = 0
        let list: ManifestRoot.PageList
        if let rootEntry = entries.root {
            var root = try ManifestRoot(parsing: try Self.open(rootEntry, of: own, limit: Int(FormatLimits.manifestBytes)),
                                        mode: header.mode, dependencies: header.dependsOn.count)
            if case let .sameAs(holder, digest) = root {
                let other = try present(holder, "the manifest")
                guard let otherRoot = rootOf[holder] else { throw FormatError.invalidManifest("archive \(holder) has no root") }
                let plaintext = try Self.open(otherRoot, of: other, limit: Int(FormatLimits.manifestBytes))
                guard try SHA256Digest.hash(plaintext) == digest else {
                    throw FormatError.invalidManifest("archive \(other.header.archiveIDHex)'s manifest is not the one this archive names")
                }
                root = try ManifestRoot(parsing: plaintext, mode: header.mode, dependencies: other.header.dependsOn.count)
                listHolder = holder
            }
            guard case .pages(let pages) = root else { throw FormatError.invalidManifest("a root names a root that names another") }
            list = pages
            pagesWithoutRoot = nil
        } else {
            let (found, stopped) = try Self.pagesWithoutRoot(entries, of: own, mode: header.mode)
            list = found
            pagesWithoutRoot = (found.pages.count, stopped)
        }
        vaultKeys = header.mode == .secure ? list.vaultKeys : nil

        // Every page once, in order: its checks, and the packs' tiling by this archive's own
        // items (FORMAT.md §10.5) as a running state: the pack being filled, and how far.
        var pages: [Page] = [], packEnds: [Int: Int] = [:], unplaced = Set<Int>()
        var ownPages = 0, index = 0, sum: Int64 = 0, lastID: [UInt8]? = nil
        var filling: (pack: Int, filled: Int64, last: Int)? = nil, expectedPack = 0
        var lostPages: [LostPage] = [], afterLostPage = false
        func closePack() throws {
            guard let (pack, filled, last) = filling else { return }
            let holds = entries.packs[pack].flatMap { FormatLimits.payloadLength(sealedLength: $0.size) }
            if holds == filled {
                packEnds[pack] = last
            } else if !entries.salvaging {
                throw FormatError.invalidManifest("pack \(pack) does not hold exactly the items the manifest puts there")
            }
        }
        for (number, descriptor) in list.pages.enumerated() {
            let pageHolder = try Self.renumber(descriptor.holder, from: listHolder, renumbering, dependsOn: header.dependsOn)
            if pageHolder == 0 {
                // This archive's own pages come in root order, numbered from 0.
                guard descriptor.page == ownPages else { throw FormatError.invalidManifest("page \(number) is not where the root puts it") }
                ownPages += 1
            }
            let page: Page, records: [ManifestRecord]
            do {
                let holder = try present(pageHolder, "page \(number)")
                guard let entry = pagesOf[pageHolder]?[descriptor.page] else { throw FormatError.invalidManifest("page \(number) is missing") }
                page = Page(number: number, holder: pageHolder, entry: entry, descriptor: descriptor, firstIndex: index)
                records = try Self.records(of: page, number: number, from: holder, mode: header.mode)
            } catch where salvaging && (error is FormatError || error is CryptoError || error is ContainerError) {
                // Its items are lost; the root still says how many and from which ID. Its
                // packs (if any) lie between the last pack read and the next page's first.
                lostPages.append(LostPage(number: number, itemCount: descriptor.itemCount, firstID: ManifestRecord.idString(descriptor.firstID),
                                          problem: Self.reason(error)))
                afterLostPage = true
                continue
            }
            if let lastID, let first = records.first, !lastID.lexicographicallyPrecedes(first.id) {
                throw FormatError.invalidManifest("page \(number) does not follow the page before it")
            }
            lastID = records.last?.id
            for record in records {
                guard header.mode == .portable || list.vaultKeys[record.compartment] != nil else {
                    throw FormatError.invalidManifest("item \(record.idString): no key ID for its compartment")
                }
                sum += record.size
                let itemHolder = try Self.renumber(record.location.holder, from: pageHolder, renumbering, dependsOn: header.dependsOn)
                let pack = Int(record.location.pack)
                if itemHolder == 0 {
                    // This archive's own items tile its packs: each starts where the one
                    // before it in its pack ended, packs in order from 0, each pack after the
                    // page that lists its items (so a streaming reader meets the page first).
                    if filling?.pack != pack {
                        try closePack()
                        // After a lost page, its packs (how many is not known) are skipped.
                        guard pack == expectedPack || (afterLostPage && pack > expectedPack) else {
                            throw FormatError.invalidManifest("item \(record.idString) is not where the packs continue")
                        }
                        expectedPack = pack + 1
                        afterLostPage = false
                        filling = (pack, 0, index)
                    }
                    guard record.location.offset == filling?.filled else {
                        throw FormatError.invalidManifest("item \(record.idString) is not where the pack continues")
                    }
                    guard entries.salvaging || entries.pageOfPack[pack] == (pageHolder == 0 ? descriptor.page : -1) else {
                        throw FormatError.invalidManifest("item \(record.idString) is in a pack that does not follow its page")
                    }
                    filling?.filled += record.payloadSize(header.mode)
                    filling?.last = index
                } else if let itemArchive = archives[itemHolder] {
                    // An item held by another archive is found in that archive's pack, and
                    // checked by its size and digest when it is read.
                    guard let packEntry = itemArchive.packs[pack], let payload = FormatLimits.payloadLength(sealedLength: packEntry.size),
                          record.location.offset + record.payloadSize(header.mode) <= payload else {
                        guard entries.salvaging else {
                            throw FormatError.invalidManifest("item \(record.idString) is not in archive \(itemArchive.header.archiveIDHex)'s pack \(pack)")
                        }
                        unplaced.insert(index)
                        index += 1
                        continue
                    }
                } else {
                    unplaced.insert(index)   // a salvage: its archive is missing
                }
                index += 1
            }
            pages.append(page)
        }
        try closePack()
        // A page lost because its entry is missing leaves one fewer than the root lists.
        guard entries.salvaging || !lostPages.isEmpty || ownPages == entries.pages.count else {
            throw FormatError.invalidManifest("the root lists \(ownPages) of this archive's pages but it holds \(entries.pages.count)")
        }
        // A lost page's items are not counted: their sizes went with it, and so did its packs.
        guard !lostPages.isEmpty || sum == list.plaintextBytes else {
            throw FormatError.invalidManifest("the root's plaintext size is not the sum of the items' sizes")
        }
        guard entries.salvaging || !lostPages.isEmpty || expectedPack == entries.packs.count else {
            throw FormatError.invalidManifest("\(entries.packs.count - expectedPack) pack(s) hold no item")
        }
        self.pages = pages
        self.lostPages = lostPages
        self.packEnds = packEnds
        self.unplaced = unplaced
        itemCount = index
        plaintextBytes = sum
    }

    /// A salvage: the pages of the root's list that are missing or do not read, in order;
    /// their items are not among `itemCount`.
    let lostPages: [LostPage]

    /// The pages whose items are here (all the root lists but `lostPages`).
    var pagesRead: Int { pages.count }

    /// Why a page was lost, in words for the report.
    private static func reason(_ error: any Error) -> String {
        switch error {
        case let error as FormatError: return String(describing: error)
        // The tag failing says no more than this; the cipher's own words would nest a third
        // pair of brackets into the report.
        case is CryptoError: return "it does not authenticate: damaged, or not this archive's page"
        default: return String(describing: error)
        }
    }

    /// Without the root (a salvage of a copy cut short): how many of the archive's own pages
    /// were read, from page 0, and why the next one was not (missing, or what failed). Whether
    /// the archive held more cannot be known. Nil when the root was read.
    let pagesWithoutRoot: (read: Int, stopped: String)?

    /// The page list a salvage reads when the root is missing: the archive's own pages from
    /// page 0, each authenticated under its own entry key (which binds the archive's ID and
    /// the page's number), up to the first that is missing or does not read. What the root
    /// would add, which pages there are and their digests, is lost with it; so is which key
    /// each compartment of a secure archive is sealed under, so a secure archive is not
    /// salvaged this way.
    private static func pagesWithoutRoot(_ entries: PackedEntries, of own: Holder, mode: ArchiveMode) throws -> (ManifestRoot.PageList, stopped: String) {
        guard mode == .portable else {
            throw FormatError.invalidManifest("there is no \(EntryName.manifestRoot) (the archive's last entry: is it a copy cut short?), and a secure archive's root names the keys its items are sealed under")
        }
        var descriptors: [PageDescriptor] = [], count: Int64 = 0, bytes: Int64 = 0
        var stopped = "page 0 is missing"
        while true {
            let number = descriptors.count
            guard let entry = entries.pages[number] else {
                stopped = "page \(number) is missing"
                break
            }
            let records: [ManifestRecord], plaintext: [UInt8]
            do {
                plaintext = try open(entry, of: own, limit: ManifestV3.pageBytes)
                records = try ManifestPage.parse(plaintext, mode: mode, dependencies: own.header.dependsOn.count, what: "page \(number)")
            } catch {
                stopped = "page \(number) does not read (\(error))"
                break
            }
            guard let first = records.first else { break }   // the parser refuses an empty page
            descriptors.append(PageDescriptor(firstID: first.id, itemCount: records.count, holder: 0, page: number,
                                              plaintextLength: plaintext.count, sha256: try SHA256Digest.hash(plaintext)))
            count += Int64(records.count)
            bytes += records.reduce(0) { $0 + $1.size }
        }
        guard !descriptors.isEmpty else {
            throw FormatError.invalidManifest("there is no \(EntryName.manifestRoot) (the archive's last entry: is it a copy cut short?), and \(stopped)")
        }
        return (ManifestRoot.PageList(vaultKeys: [:], itemCount: count, plaintextBytes: bytes, pages: descriptors), stopped)
    }

    /// The archive read (`archives[0]`).
    let own: Holder
    var contentKey: SecureBytes { own.contentKey }
    var header: ArchiveHeader { own.header }

    /// Item `index` (manifest order) and where its payload is: nil in a salvage for an item
    /// whose pack (or archive) is missing.
    func item(at index: Int) throws -> (item: Manifest.Item, location: PackLocation?) {
        guard (0..<itemCount).contains(index) else { throw FormatError.invalidManifest("no item \(index)") }
        // The page whose first item is the last one at or before `index`.
        var low = 0, high = pages.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if pages[middle].firstIndex <= index { low = middle } else { high = middle - 1 }
        }
        let record = try loadedPage(low).record(index - pages[low].firstIndex)
        let page = pages[low]
        let itemHolder = try renumber(record.location.holder, from: page.holder)
        let pack = Int(record.location.pack)
        let location: PackLocation?
        if itemHolder == 0 {
            location = packEnds[pack].map { PackLocation(pack: pack, offset: record.location.offset, endsPack: $0 == index) }
        } else {
            location = unplaced.contains(index) ? nil : PackLocation(archive: itemHolder, pack: pack, offset: record.location.offset, endsPack: false)
        }
        let item = Manifest.Item(id: record.idString, kind: record.kind, compartment: record.compartment, name: record.name,
                                 created: Timestamp.date(milliseconds: record.created),
                                 expires: record.expires.map(Timestamp.date(milliseconds:)), size: record.size,
                                 sha256: record.sha256.hex, mode: mode, pack: (EntryName.pack(pack), record.location.offset),
                                 heldBy: itemHolder == 0 ? nil : dependsOn[itemHolder - 1].hex)
        return (item, location)
    }

    private func loadedPage(_ n: Int) throws -> ParsedPage {
        lock.lock()
        defer { lock.unlock() }
        if let page = loaded[n] {
            if lastUsed.last != n { lastUsed.removeAll { $0 == n }; lastUsed.append(n) }
            return page
        }
        let page = pages[n]
        guard let holder = archives[page.holder] else { throw FormatError.invalidManifest("page \(page.number)'s archive is missing") }
        let parsed: ParsedPage
        do {
            let plaintext = try Self.plaintext(of: page, number: page.number, from: holder)
            parsed = try ManifestPage.indexed(plaintext, mode: mode, dependencies: holder.header.dependsOn.count, what: "page \(page.number)")
            try Self.check(page, number: page.number, holds: parsed.count, from: parsed.firstID)
        } catch let error as FormatError {
            throw ArchiveError.damaged(archive: archiveName, what: "manifest page \(page.number) no longer reads as it did when the archive was opened (\(error))")
        } catch let error as CryptoError {
            throw ArchiveError.damaged(archive: archiveName, what: "manifest page \(page.number) no longer reads as it did when the archive was opened (\(error))")
        }
        loaded[n] = parsed
        lastUsed.append(n)
        if lastUsed.count > Self.pagesKept { loaded[lastUsed.removeFirst()] = nil }
        return parsed
    }

    /// A page's records, checked against its descriptor: length, SHA-256, count, first ID.
    private static func records(of page: Page, number: Int, from holder: Holder, mode: ArchiveMode) throws -> [ManifestRecord] {
        let plaintext = try plaintext(of: page, number: number, from: holder)
        let records = try ManifestPage.parse(plaintext, mode: mode, dependencies: holder.header.dependsOn.count, what: "page \(number)")
        try check(page, number: number, holds: records.count, from: records.first?.id)
        return records
    }

    /// A page's plaintext, checked against its descriptor's length and SHA-256.
    private static func plaintext(of page: Page, number: Int, from holder: Holder) throws -> [UInt8] {
        let plaintext = try open(page.entry, of: holder, length: page.descriptor.plaintextLength)
        guard plaintext.count == page.descriptor.plaintextLength, try SHA256Digest.hash(plaintext) == page.descriptor.sha256 else {
            throw FormatError.invalidManifest("page \(number) is not the page the root lists")
        }
        return plaintext
    }

    /// A parsed page against its descriptor's item count and first ID.
    private static func check(_ page: Page, number: Int, holds count: Int, from firstID: [UInt8]?) throws {
        guard count == page.descriptor.itemCount, firstID == page.descriptor.firstID else {
            throw FormatError.invalidManifest("page \(number) does not hold the items the root lists")
        }
    }

    private static func open(_ entry: ZipEntryInfo, of holder: Holder, limit: Int) throws -> [UInt8] {
        try reader(of: entry, of: holder).readAll(limit: limit)
    }

    /// A page's plaintext, whose length its descriptor gives.
    private static func open(_ entry: ZipEntryInfo, of holder: Holder, length: Int) throws -> [UInt8] {
        try reader(of: entry, of: holder).readAll(expecting: length)
    }

    /// The holder's one ZIP reader serves the thread that reads packs and the one that reads
    /// pages again (`ZipReader` serializes libzip's calls).
    private static func reader(of entry: ZipEntryInfo, of holder: Holder) throws -> BoundedReader {
        let key = try ArchiveKeys.entryKey(contentKey: holder.contentKey, header: holder.header, entryName: entry.name)
        return BoundedReader(try ChunkedOpeningSource(holder.reader.zip.open(entry), key: key))
    }

    /// Holder `h` as numbered by archive `a`, in this archive's numbering: every archive
    /// reached must be one this archive's header lists (no chains).
    private func renumber(_ h: Int, from a: Int) throws -> Int { try Self.renumber(h, from: a, renumbering, dependsOn: dependsOn) }

    private static func renumber(_ h: Int, from a: Int, _ renumbering: [[Int]], dependsOn: [[UInt8]]) throws -> Int {
        if a == 0 || h == 0 { return h == 0 ? a : h }
        guard renumbering.indices.contains(a), renumbering[a].indices.contains(h - 1) else {
            throw FormatError.invalidManifest("a holder past archive \(dependsOn[a - 1].hex)'s dependsOn")
        }
        guard renumbering[a][h - 1] > 0 else {
            throw FormatError.invalidManifest("archive \(dependsOn[a - 1].hex) refers to an archive which this archive's header does not list")
        }
        return renumbering[a][h - 1]
    }
}

/// A manifest page a salvage could not read (FORMAT.md §10.8): its place in the root's list,
/// how many items it held and the first one's ID (both from the root), and why.
public struct LostPage: Sendable, Equatable {
    public let number: Int
    public let itemCount: Int
    public let firstID: String
    public let problem: String
}

/// Where an item's payload is: its archive (0 the one read, k its `dependsOn[k − 1]`), its
/// pack, its offset there, whether it is the pack's last (known for the archive's own).
struct PackLocation {
    var archive = 0
    let pack: Int
    let offset: Int64
    let endsPack: Bool
}

/// Reads items' payloads out of their packs, in manifest order: a pack is opened once and
/// each item is the next stretch of its verified plaintext. An item asked for out of order
/// (after a salvage skipped one) opens its pack again and reads up to it. The last item of a
/// pack also reads the pack's end, so its last-chunk flag and length are verified.
final class PackCursor {
    private let contents: PackedContents
    private let archive: UnlockedArchive
    /// Per archive (0 the one read, k a dependency): its open pack and where in it. Items
    /// of an incremental archive alternate between archives in ID order, and each archive's
    /// own stretch of them goes forward through its packs: one cursor each, so nothing is
    /// read twice when the reads switch archives.
    private var cursors: [Int: Cursor] = [:]
    /// The archive whose cursor the current item reads.
    private var current = 0

    private struct Cursor {
        var pack: Int
        var source: ByteSource?
        var position: Int64
    }

    init(_ contents: PackedContents, archive: UnlockedArchive) {
        self.contents = contents
        self.archive = archive
    }

    func payload(of index: Int) throws -> ByteSource {
        let (item, place) = try contents.item(at: index)
        guard let location = place, let holder = contents.archives[location.archive],
              let entry = holder.packs[location.pack] else {
            let place = item.heldBy.map { "archive \($0), which holds it, or its pack" } ?? "the pack of item \(item.id)"
            throw ArchiveError.damaged(archive: archive.reader.name, what: "\(place) is missing or has the wrong size")
        }
        current = location.archive
        var cursor: Cursor
        if let open = cursors[location.archive], open.pack == location.pack, open.position <= location.offset, open.source != nil {
            cursor = open
        } else {
            // From the chunk the item starts in: the chunks before it are neither read
            // through the cipher nor needed (a salvage goes on past a damaged one).
            // An empty item at the end of a pack whose payload fills whole chunks starts past
            // the last chunk: it is read from that last chunk (which must still verify).
            let packPayload = FormatLimits.payloadLength(sealedLength: entry.size) ?? 0
            let chunk = min(location.offset, max(0, packPayload - 1)) / Int64(FormatLimits.chunkSize)
            let sealed = try holder.reader.zip.open(entry, checkCRC: false)
            try Self.discard(chunk * Int64(FormatLimits.chunkSize + FormatLimits.chunkTag), of: sealed)
            let key = try ArchiveKeys.entryKey(contentKey: holder.contentKey, header: holder.header, entryName: entry.name)
            cursor = Cursor(pack: location.pack, source: try ChunkedOpeningSource(sealed, key: key, firstChunk: UInt64(chunk)),
                            position: chunk * Int64(FormatLimits.chunkSize))
            cursors[location.archive] = cursor
        }
        try skip(location.offset - cursor.position)
        return PackWindow(self, length: item.payloadSize, endsPack: location.endsPack)
    }

    private static func discard(_ count: Int64, of source: ByteSource) throws {
        var left = count
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while left > 0 {
            let n = try source.read(into: &buffer, offset: 0, count: Int(min(left, Int64(buffer.count))))
            guard n > 0 else { throw CryptoError.truncated }
            left -= Int64(n)
        }
    }

    private func skip(_ count: Int64) throws {
        var left = count
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while left > 0 {
            let n = try read(into: &buffer, offset: 0, count: Int(min(left, Int64(buffer.count))))
            guard n > 0 else { throw ArchiveError.damaged(archive: archive.reader.name, what: "a pack ends before its items") }
            left -= Int64(n)
        }
    }

    fileprivate func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        guard let source = cursors[current]?.source else { return 0 }
        let n = try source.read(into: &buffer, offset: offset, count: count)
        cursors[current]?.position += Int64(n)
        return n
    }

    /// After a pack's last item: the pack must end here (its last chunk verified, no more).
    fileprivate func expectPackEnd() throws {
        var probe = [UInt8](repeating: 0, count: 1)
        guard try read(into: &probe, offset: 0, count: 1) == 0 else {
            throw ArchiveError.damaged(archive: archive.reader.name, what: "a pack holds bytes after its last item")
        }
        cursors[current]?.source = nil
    }
}

/// One item's payload: the next `length` bytes of its pack.
private final class PackWindow: ByteSource {
    private let cursor: PackCursor
    private var left: Int64
    private let endsPack: Bool

    init(_ cursor: PackCursor, length: Int64, endsPack: Bool) {
        self.cursor = cursor
        left = length
        self.endsPack = endsPack
    }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        guard left > 0 else {
            if endsPack { try cursor.expectPackEnd() }
            return 0
        }
        let n = try cursor.read(into: &buffer, offset: offset, count: Int(min(Int64(count), left)))
        guard n > 0 else { throw ArchiveError.damaged(archive: "", what: "a pack ends inside an item") }
        left -= Int64(n)
        return n
    }
}
