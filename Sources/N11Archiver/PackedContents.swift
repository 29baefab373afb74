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
    let pages: [ZipEntryInfo]
    /// By pack number.
    let packs: [ZipEntryInfo]
    /// For each pack, the page whose entry comes before it.
    let pageOfPack: [Int]
    let root: ZipEntryInfo

    init(_ entries: [ZipEntryInfo]) throws(FormatError) {
        guard entries.count >= 3, entries[0].name == EntryName.header else { throw .notAnArchive("first entry is not \(EntryName.header)") }
        guard entries[1].name == EntryName.headerMAC else { throw .invalidEntryName(entries[1].name) }
        guard let last = entries.last, last.name == EntryName.manifestRoot else { throw .invalidManifest("the last entry is not \(EntryName.manifestRoot)") }
        var next = 2
        if entries[2].name == EntryName.headerSignature {
            guard entries[2].size == Int64(FormatLimits.signatureBytes) else { throw .invalidHeader("\(EntryName.headerSignature) of \(entries[2].size) bytes") }
            signatureEntry = entries[2]
            next = 3
        } else {
            signatureEntry = nil
        }
        var pages: [ZipEntryInfo] = [], packs: [ZipEntryInfo] = [], pageOfPack: [Int] = []
        for entry in entries[next..<(entries.count - 1)] {
            if entry.name == EntryName.page(pages.count) {
                pages.append(entry)
            } else if entry.name == EntryName.pack(packs.count), !pages.isEmpty {
                packs.append(entry)
                pageOfPack.append(pages.count - 1)
            } else {
                throw .invalidEntryName(entry.name)
            }
            guard FormatLimits.payloadLength(sealedLength: entry.size) != nil else {
                throw .invalidManifest("entry '\(entry.name)' of \(entry.size) bytes is no sealed stream")
            }
        }
        guard FormatLimits.payloadLength(sealedLength: last.size) != nil else {
            throw .invalidManifest("entry '\(last.name)' of \(last.size) bytes is no sealed stream")
        }
        guard pages.count <= ManifestV3.pages, UInt64(packs.count) <= ManifestV3.packs else {
            throw .limitExceeded("\(pages.count) pages and \(packs.count) packs")
        }
        self.pages = pages
        self.packs = packs
        self.pageOfPack = pageOfPack
        root = last
    }
}

/// What a version 3 archive's authenticated manifest says: every item, and where its payload
/// is. Made from the root and every page (each checked against its descriptor), after the
/// items were checked to fill each pack exactly, in order, with nothing left over.
final class PackedContents {
    let manifest: Manifest
    let packs: [ZipEntryInfo]
    /// Per item (manifest order): its pack and offset there, and whether it is the pack's last.
    let locations: [(pack: Int, offset: Int64, endsPack: Bool)]
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
        guard header.dependsOn.isEmpty else {
            throw ArchiveError.unsupported(archive: reader.name, why: "it is an incremental archive (it needs \(header.dependsOn.count) other archive(s)), which this n11archive cannot read yet")
        }
        let root = try ManifestRoot(parsing: try open(entries.root, limit: Int(FormatLimits.manifestBytes)), mode: header.mode,
                                    dependencies: header.dependsOn.count)
        guard case .pages(let list) = root else { throw FormatError.invalidManifest("a full archive's root names another archive") }
        guard list.pages.count == entries.pages.count else {
            throw FormatError.invalidManifest("the root lists \(list.pages.count) pages but the archive holds \(entries.pages.count)")
        }
        var items: [Manifest.Item] = [], locations: [(pack: Int, offset: Int64, endsPack: Bool)] = []
        var tiling = PackTiling(packs: entries.packs, pageOfPack: entries.pageOfPack, mode: header.mode)
        for (number, descriptor) in list.pages.enumerated() {
            guard descriptor.holder == 0, descriptor.page == number else { throw FormatError.invalidManifest("page \(number) is not where the root puts it") }
            let plaintext = try open(entries.pages[number], limit: ManifestV3.pageBytes)
            guard plaintext.count == descriptor.plaintextLength, try SHA256Digest.hash(plaintext) == descriptor.sha256 else {
                throw FormatError.invalidManifest("page \(number) is not the page the root lists")
            }
            let records = try ManifestPage.parse(plaintext, mode: header.mode, dependencies: 0, what: "page \(number)")
            guard records.count == descriptor.itemCount, records.first?.id == descriptor.firstID else {
                throw FormatError.invalidManifest("page \(number) does not hold the items the root lists")
            }
            if let previous = items.last, let first = records.first, previous.id >= first.idString {
                throw FormatError.invalidManifest("page \(number) does not follow the page before it")
            }
            for record in records {
                guard header.mode == .portable || list.vaultKeys[record.compartment] != nil else {
                    throw FormatError.invalidManifest("item \(record.idString): no key ID for its compartment")
                }
                locations.append(try tiling.place(record, page: number))
                items.append(Manifest.Item(id: record.idString, kind: record.kind, compartment: record.compartment, name: record.name,
                                           created: Timestamp.date(milliseconds: record.created),
                                           expires: record.expires.map(Timestamp.date(milliseconds:)), size: record.size,
                                           sha256: record.sha256.hex, mode: header.mode))
            }
        }
        try tiling.finish()
        for n in locations.indices where n + 1 == locations.count || locations[n + 1].pack != locations[n].pack {
            locations[n].endsPack = true
        }
        self.locations = locations
        manifest = Manifest(header: header, items: items, vaultKeys: header.mode == .secure ? list.vaultKeys : nil)
    }
}

/// Checks that the items, in manifest order, fill the packs one after another: each starts
/// where the one before it in its pack ended, each pack holds exactly its payload, and each
/// pack comes after the page that lists its items (so a streaming reader meets the page first).
private struct PackTiling {
    let packs: [ZipEntryInfo]
    let pageOfPack: [Int]
    let mode: ArchiveMode
    var current = -1
    var filled: Int64 = 0

    init(packs: [ZipEntryInfo], pageOfPack: [Int], mode: ArchiveMode) {
        self.packs = packs
        self.pageOfPack = pageOfPack
        self.mode = mode
    }

    mutating func place(_ record: ManifestRecord, page: Int) throws -> (pack: Int, offset: Int64, endsPack: Bool) {
        let pack = Int(record.location.pack)
        if pack != current {
            try finishPack()
            guard pack == current + 1, record.location.offset == 0 else { throw FormatError.invalidManifest("item \(record.idString) is not where the packs continue") }
            current = pack
        }
        guard record.location.holder == 0, pack < packs.count, pageOfPack[pack] == page, record.location.offset == filled else {
            throw FormatError.invalidManifest("item \(record.idString) is not where the packs continue")
        }
        filled += record.payloadSize(mode)
        return (pack, record.location.offset, false)
    }

    private mutating func finishPack() throws {
        guard current >= 0 else { return }
        guard FormatLimits.payloadLength(sealedLength: packs[current].size) == filled else {
            throw FormatError.invalidManifest("pack \(current) holds \(packs[current].size) bytes, not the items the manifest puts there")
        }
        filled = 0
    }

    mutating func finish() throws {
        try finishPack()
        guard current == packs.count - 1 else { throw FormatError.invalidManifest("\(packs.count - current - 1) pack(s) hold no item") }
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
        let location = contents.locations[index]
        let item = archive.manifest.items[index]
        if location.pack != pack || position > location.offset || source == nil {
            let entry = contents.packs[location.pack]
            let key = try ArchiveKeys.entryKey(contentKey: contents.contentKey, header: contents.header, entryName: entry.name)
            source = try ChunkedOpeningSource(archive.reader.zip.open(entry, checkCRC: false), key: key)
            pack = location.pack
            position = 0
        }
        try skip(location.offset - position)
        return PackWindow(self, length: item.payloadSize, endsPack: location.endsPack)
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
