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
    let root: ZipEntryInfo
    /// Found by name for a salvage: packs may be missing, and what the layout does not name
    /// is ignored; the header, its MAC, every page and the root must still be there.
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
        guard let root else { throw .invalidManifest("there is no \(EntryName.manifestRoot)") }
        guard FormatLimits.payloadLength(sealedLength: root.size) != nil else {
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

/// What a version 3 archive's authenticated manifest says: every item, and where its payload
/// is. Made from the root and every page (each checked against its descriptor), after the
/// items were checked to fill each pack exactly, in order, with nothing left over.
final class PackedContents {
    let manifest: Manifest
    let packs: [Int: ZipEntryInfo]
    /// Per item (manifest order): its pack and offset there, and whether it is the pack's
    /// last; nil in a salvage for an item whose pack is missing or has the wrong size.
    let locations: [PackLocation?]
    let contentKey: SecureBytes
    let header: ArchiveHeader

    init(reading entries: PackedEntries, of reader: ArchiveReader, contentKey: SecureBytes) throws {
        let header = reader.header
        self.header = header
        self.contentKey = contentKey
        packs = entries.packs
        func open(_ entry: ZipEntryInfo, limit: Int) throws -> [UInt8] {
            let key = try ArchiveKeys.entryKey(contentKey: contentKey, header: header, entryName: entry.name)
            return try BoundedReader(try ChunkedOpeningSource(reader.zip.open(entry), key: key)).readAll(limit: limit)
        }
        let root = try ManifestRoot(parsing: try open(entries.root, limit: Int(FormatLimits.manifestBytes)), mode: header.mode,
                                    dependencies: header.dependsOn.count)
        guard case .pages(let list) = root else { throw FormatError.invalidManifest("a full archive's root names another archive") }
        guard entries.salvaging || list.pages.count == entries.pages.count else {
            throw FormatError.invalidManifest("the root lists \(list.pages.count) pages but the archive holds \(entries.pages.count)")
        }
        var items: [Manifest.Item] = [], records: [ManifestRecord] = [], pageOf: [Int] = []
        for (number, descriptor) in list.pages.enumerated() {
            guard descriptor.holder == 0, descriptor.page == number else { throw FormatError.invalidManifest("page \(number) is not where the root puts it") }
            guard let entry = entries.pages[number] else { throw FormatError.invalidManifest("page \(number) is missing") }
            let plaintext = try open(entry, limit: descriptor.plaintextLength)
            guard plaintext.count == descriptor.plaintextLength, try SHA256Digest.hash(plaintext) == descriptor.sha256 else {
                throw FormatError.invalidManifest("page \(number) is not the page the root lists")
            }
            let page = try ManifestPage.parse(plaintext, mode: header.mode, dependencies: 0, what: "page \(number)")
            guard page.count == descriptor.itemCount, page.first?.id == descriptor.firstID else {
                throw FormatError.invalidManifest("page \(number) does not hold the items the root lists")
            }
            if let previous = records.last, let first = page.first, !previous.id.lexicographicallyPrecedes(first.id) {
                throw FormatError.invalidManifest("page \(number) does not follow the page before it")
            }
            for record in page {
                guard header.mode == .portable || list.vaultKeys[record.compartment] != nil else {
                    throw FormatError.invalidManifest("item \(record.idString): no key ID for its compartment")
                }
                guard record.location.holder == 0 else { throw FormatError.invalidManifest("item \(record.idString) is held by another archive") }
                records.append(record)
                pageOf.append(number)
                items.append(Manifest.Item(id: record.idString, kind: record.kind, compartment: record.compartment, name: record.name,
                                           created: Timestamp.date(milliseconds: record.created),
                                           expires: record.expires.map(Timestamp.date(milliseconds:)), size: record.size,
                                           sha256: record.sha256.hex, mode: header.mode,
                                           pack: (EntryName.pack(Int(record.location.pack)), record.location.offset)))
            }
        }
        guard records.reduce(Int64(0), { $0 + $1.size }) == list.plaintextBytes else {
            throw FormatError.invalidManifest("the root's plaintext size is not the sum of the items' sizes")
        }
        locations = try PackTiling.locate(records, pageOf: pageOf, in: entries, mode: header.mode)
        manifest = Manifest(header: header, items: items, vaultKeys: header.mode == .secure ? list.vaultKeys : nil)
    }
}

/// Where an item's payload is: its pack, its offset there, whether it is the pack's last.
struct PackLocation {
    let pack: Int
    let offset: Int64
    let endsPack: Bool
}

/// Checks that the items, in manifest order, fill the packs one after another: each starts
/// where the one before it in its pack ended, each pack holds exactly its payload, no pack
/// holds nothing, and each pack comes after the page that lists its items (so a streaming
/// reader meets the page first). In a salvage, the items of a pack that is missing or has
/// another size are left without a location (missing), as version 2's entries are.
enum PackTiling {
    static func locate(_ records: [ManifestRecord], pageOf: [Int], in entries: PackedEntries,
                       mode: ArchiveMode) throws -> [PackLocation?] {
        var locations: [PackLocation?] = []
        locations.reserveCapacity(records.count)
        var start = 0
        var expectedPack = 0
        while start < records.count {
            let pack = Int(records[start].location.pack)
            var end = start, filled: Int64 = 0
            while end < records.count && Int(records[end].location.pack) == pack {
                guard records[end].location.offset == filled else {
                    throw FormatError.invalidManifest("item \(records[end].idString) is not where the pack continues")
                }
                guard entries.salvaging || entries.pageOfPack[pack] == pageOf[end] else {
                    throw FormatError.invalidManifest("item \(records[end].idString) is in a pack that does not follow its page")
                }
                filled += records[end].payloadSize(mode)
                end += 1
            }
            guard pack == expectedPack else { throw FormatError.invalidManifest("item \(records[start].idString) is not where the packs continue") }
            expectedPack += 1
            let holds = entries.packs[pack].flatMap { FormatLimits.payloadLength(sealedLength: $0.size) }
            if holds == filled {
                for n in start..<end { locations.append(PackLocation(pack: pack, offset: records[n].location.offset, endsPack: n == end - 1)) }
            } else if entries.salvaging {
                locations += Array(repeating: nil, count: end - start)
            } else {
                throw FormatError.invalidManifest("pack \(pack) does not hold exactly the items the manifest puts there")
            }
            start = end
        }
        guard entries.salvaging || expectedPack == entries.packs.count else {
            throw FormatError.invalidManifest("\(entries.packs.count - expectedPack) pack(s) hold no item")
        }
        return locations
    }
}

/// Reads items' payloads out of their packs, in manifest order: a pack is opened once and
/// each item is the next stretch of its verified plaintext. An item asked for out of order
/// (after a salvage skipped one) opens its pack again and reads up to it. The last item of a
/// pack also reads the pack's end, so its last-chunk flag and length are verified.
final class PackCursor {
    private let contents: PackedContents
    private let archive: UnlockedArchive
    private var pack = -1
    private var source: ByteSource?
    private var position: Int64 = 0

    init(_ contents: PackedContents, archive: UnlockedArchive) {
        self.contents = contents
        self.archive = archive
    }

    func payload(of index: Int) throws -> ByteSource {
        let item = archive.manifest.items[index]
        guard let location = contents.locations[index], let entry = contents.packs[location.pack] else {
            throw ArchiveError.damaged(archive: archive.reader.name, what: "the pack of item \(item.id) is missing or has the wrong size")
        }
        if location.pack != pack || position > location.offset || source == nil {
            // From the chunk the item starts in: the chunks before it are neither read
            // through the cipher nor needed (a salvage goes on past a damaged one).
            // An empty item at the end of a pack whose payload fills whole chunks starts past
            // the last chunk: it is read from that last chunk (which must still verify).
            let packPayload = FormatLimits.payloadLength(sealedLength: entry.size) ?? 0
            let chunk = min(location.offset, max(0, packPayload - 1)) / Int64(FormatLimits.chunkSize)
            let sealed = try archive.reader.zip.open(entry, checkCRC: false)
            try Self.discard(chunk * Int64(FormatLimits.chunkSize + FormatLimits.chunkTag), of: sealed)
            let key = try ArchiveKeys.entryKey(contentKey: contents.contentKey, header: contents.header, entryName: entry.name)
            source = try ChunkedOpeningSource(sealed, key: key, firstChunk: UInt64(chunk))
            pack = location.pack
            position = chunk * Int64(FormatLimits.chunkSize)
        }
        try skip(location.offset - position)
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
        guard let source else { return 0 }
        let n = try source.read(into: &buffer, offset: offset, count: count)
        position += Int64(n)
        return n
    }

    /// After a pack's last item: the pack must end here (its last chunk verified, no more).
    fileprivate func expectPackEnd() throws {
        var probe = [UInt8](repeating: 0, count: 1)
        guard try read(into: &probe, offset: 0, count: 1) == 0 else {
            throw ArchiveError.damaged(archive: archive.reader.name, what: "a pack holds bytes after its last item")
        }
        source = nil
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
