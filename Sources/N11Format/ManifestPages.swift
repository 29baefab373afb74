import Foundation
import N11System

/// Version 3's manifest (DESIGN.md §8.2): the vault's complete item list sorted by ID, in
/// pages of binary records, and a root that says where each page is. A page or an item may
/// be held by an earlier archive (an incremental one's dependencies); `holder` 0 is the
/// archive that holds the page, `k` that archive's `dependsOn[k − 1]`.
public enum ManifestV3 {
    public static let pageMagic: [UInt8] = Array("N11P".utf8) + [0x01]
    public static let rootMagic: [UInt8] = Array("N11R".utf8) + [0x01]
    /// Items in a page, and the bytes of its plaintext.
    public static let pageItems = 16_384
    public static let pageBytes = 16 << 20
    /// Pages in a manifest: with `pageItems`, no item ceiling below 2^32.
    public static let pages = 1 << 24
    /// Archives one archive may depend on.
    public static let dependencies = 256
    /// Packs in an archive, and the payload of one (a single item of 2^40 bytes, sealed as
    /// a secure vault file, fits).
    public static let packs: UInt64 = 1 << 32
    public static let packPayload: Int64 = 1 << 41
    /// Item times: milliseconds since 1970, from 0000-01-01T00:00:00Z to
    /// 9999-12-31T23:59:59.999Z, the range the format's JSON timestamps have (an item
    /// restored from a version 2 archive may be dated before 1970).
    public static let itemTimes: ClosedRange<Int64> = -62_167_219_200_000...253_402_300_799_999
}

extension Compartment {
    /// Version 3's code for the compartment (records' flags, the root's key IDs).
    var code: UInt8 {
        switch self {
        case .vault: return 0
        case .fade: return 1
        case .backup: return 2
        }
    }

    init?(code: UInt8) {
        switch code {
        case 0: self = .vault
        case 1: self = .fade
        case 2: self = .backup
        default: return nil
        }
    }
}

/// Where an item's payload is: a pack of an archive, from `offset`.
public struct ItemLocation: Sendable, Equatable {
    /// 0: the archive that holds the page; k: that archive's `dependsOn[k − 1]`.
    public let holder: Int
    public let pack: UInt32
    public let offset: Int64

    public init(holder: Int, pack: UInt32, offset: Int64) {
        self.holder = holder
        self.pack = pack
        self.offset = offset
    }
}

/// One item of a version 3 manifest page.
public struct ManifestRecord: Sendable, Equatable {
    /// The item's UUID as 16 bytes (its canonical text is `idString`).
    public let id: [UInt8]
    public let kind: ItemKind
    public let compartment: Compartment
    public let name: String
    /// Milliseconds since 1970 (negative before), within `ManifestV3.itemTimes`.
    public let created: Int64
    /// The same; exactly the `fade` items have one.
    public let expires: Int64?
    public let size: Int64
    public let sha256: [UInt8]
    public let location: ItemLocation

    public init(id: [UInt8], kind: ItemKind, compartment: Compartment, name: String, created: Int64, expires: Int64?,
                size: Int64, sha256: [UInt8], location: ItemLocation) {
        self.id = id; self.kind = kind; self.compartment = compartment; self.name = name
        self.created = created; self.expires = expires; self.size = size; self.sha256 = sha256; self.location = location
    }

    /// The canonical upper-case UUID.
    public var idString: String { Self.idString(id) }

    /// Byte by byte: a reader and the writer convert every item's ID, and Foundation's string
    /// replacing was a fifth of creating an archive of 100,000 notes.
    public static func idString(_ id: [UInt8]) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var out = [UInt8]()
        out.reserveCapacity(36)
        for (i, byte) in id.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The 16 bytes of a canonical UUID, or nil.
    public static func idBytes(_ id: String) -> [UInt8]? {
        guard EntryName.isCanonicalID(id) else { return nil }
        var out = [UInt8](), high: UInt8? = nil
        out.reserveCapacity(16)
        for byte in id.utf8 where byte != UInt8(ascii: "-") {
            // Canonical: digits and upper-case A–F only (checked above).
            let value = byte <= UInt8(ascii: "9") ? byte - UInt8(ascii: "0") : byte - UInt8(ascii: "A") + 10
            if let h = high { out.append(h << 4 | value); high = nil } else { high = value }
        }
        return out
    }

    /// The payload an archive of `mode` stores for it (the vault file in secure mode).
    public func payloadSize(_ mode: ArchiveMode) -> Int64 {
        mode == .portable ? size : size + FormatLimits.vaultFileOverhead
    }

    // flags: bit 0 the kind (0 photo, 1 note), bits 1–2 the compartment (`Compartment.code`),
    // bit 3 an expiry follows; the other bits are 0.

    func write(to w: inout BinaryWriter) {
        w.append(id)
        let compartmentBits = compartment.code << 1
        w.byte((kind == .note ? 1 : 0) | compartmentBits | (expires == nil ? 0 : 0x08))
        w.integer(size)
        w.append(sha256)
        w.signedInteger(created)
        if let expires { w.signedInteger(expires) }
        let name = Array(self.name.utf8)
        w.integer(name.count)
        w.append(name)
        w.integer(location.holder)
        w.integer(UInt64(location.pack))
        w.integer(location.offset)
    }

    init(reading r: inout BinaryReader, mode: ArchiveMode, dependencies: Int) throws(FormatError) {
        id = try r.bytes(16)
        let flags = try r.byte()
        guard flags & 0xF0 == 0, let compartment = Compartment(code: (flags >> 1) & 0x03) else { throw r.failure("item flags \(flags)") }
        kind = flags & 1 == 1 ? .note : .photo
        self.compartment = compartment
        size = try r.int64(atMost: FormatLimits.itemSize, "size")
        sha256 = try r.bytes(32)
        created = try r.signedInteger(in: ManifestV3.itemTimes, "created")
        expires = try flags & 0x08 == 0 ? nil : r.signedInteger(in: ManifestV3.itemTimes, "expires")
        guard (compartment == .fade) == (expires != nil) else { throw r.failure("item \(Self.idString(id)): an expiry goes with fade items and only with them") }
        let nameLength = try r.int(atMost: FormatLimits.nameBytes, "name length")
        let nameBytes = try r.bytes(nameLength)
        guard nameLength > 0, !nameBytes.contains(0), !nameBytes.contains(UInt8(ascii: "/")),
              let name = String(validating: nameBytes, as: UTF8.self) else { throw r.failure("item \(Self.idString(id)) name") }
        self.name = name
        let holder = try r.int(atMost: dependencies, "holder")
        let pack = UInt32(try r.integer(atMost: ManifestV3.packs - 1, "pack"))
        let offset = try r.int64(atMost: ManifestV3.packPayload, "offset")
        location = ItemLocation(holder: holder, pack: pack, offset: offset)
        guard offset + (mode == .portable ? size : size + FormatLimits.vaultFileOverhead) <= ManifestV3.packPayload else {
            throw r.failure("item \(Self.idString(id)) ends past a pack's bound")
        }
    }
}

/// A page of a version 3 manifest: 1…16,384 records in strictly increasing ID order.
public enum ManifestPage {
    public static func serialized(_ records: [ManifestRecord]) -> [UInt8] {
        var page = Writer(count: records.count)
        for record in records { page.append(record) }
        return page.bytes
    }

    /// A page written a record at a time, so that its writer need not hold the records.
    public struct Writer {
        private var w: BinaryWriter
        private let count: Int
        private var written = 0

        public init(count: Int) {
            precondition((1...ManifestV3.pageItems).contains(count), "a page holds 1…\(ManifestV3.pageItems) items")
            self.count = count
            w = BinaryWriter(capacity: 16 + count * 100)
            w.append(ManifestV3.pageMagic)
            w.integer(count)
        }

        public mutating func append(_ record: ManifestRecord) {
            precondition(written < count, "more records than the page's count")
            record.write(to: &w)
            written += 1
        }

        /// The page, once all `count` records are in.
        public var bytes: [UInt8] {
            precondition(written == count, "\(written) of the page's \(count) records")
            return w.bytes
        }
    }

    /// Parses a page's plaintext. `dependencies` is the number of archives its holder
    /// depends on (a record's `holder` is at most that); `what` names it in messages.
    public static func parse(_ bytes: [UInt8], mode: ArchiveMode, dependencies: Int, what: String) throws(FormatError) -> [ManifestRecord] {
        var records: [ManifestRecord] = []
        try walk(bytes, mode: mode, dependencies: dependencies, what: what) { count in
            records.reserveCapacity(count)
        } each: { _, record in
            records.append(record)
        }
        return records
    }

    /// Checks a page's plaintext as `parse` does, and keeps it as it is with where each
    /// record starts: about 90 bytes an item held instead of the records (issue 34).
    public static func indexed(_ bytes: [UInt8], mode: ArchiveMode, dependencies: Int, what: String) throws(FormatError) -> ParsedPage {
        var starts: [UInt32] = []
        try walk(bytes, mode: mode, dependencies: dependencies, what: what) { count in
            starts.reserveCapacity(count)
        } each: { start, _ in
            starts.append(UInt32(start))   // a page is at most 16 MiB
        }
        return ParsedPage(plaintext: bytes, starts: starts, mode: mode, dependencies: dependencies, what: what)
    }

    /// Every record in order, with the offset it starts at, each checked (bounds, strictly
    /// increasing IDs), then the end.
    private static func walk(_ bytes: [UInt8], mode: ArchiveMode, dependencies: Int, what: String,
                             count counted: (Int) -> Void, each: (Int, ManifestRecord) -> Void) throws(FormatError) {
        guard bytes.count <= ManifestV3.pageBytes else { throw .limitExceeded("\(what) of \(bytes.count) bytes (at most \(ManifestV3.pageBytes))") }
        var r = BinaryReader(bytes, what: what)
        guard try r.bytes(ManifestV3.pageMagic.count) == ManifestV3.pageMagic else { throw r.failure("not a manifest page") }
        let count = try r.int(atMost: ManifestV3.pageItems, "item count")
        guard count > 0 else { throw r.failure("a page without items") }
        counted(count)
        var previous: [UInt8]? = nil
        for _ in 0..<count {
            let start = r.position
            let record = try ManifestRecord(reading: &r, mode: mode, dependencies: dependencies)
            if let previous, !previous.lexicographicallyPrecedes(record.id) {
                throw r.failure("item \(record.idString) is not after \(ManifestRecord.idString(previous))")
            }
            previous = record.id
            each(start, record)
        }
        try r.end()
    }
}

/// A page checked whole by `ManifestPage.indexed`, kept as its plaintext: a record is read
/// again when it is asked for.
public struct ParsedPage: Sendable {
    public let plaintext: [UInt8]
    private let starts: [UInt32]
    private let mode: ArchiveMode
    private let dependencies: Int
    private let what: String

    fileprivate init(plaintext: [UInt8], starts: [UInt32], mode: ArchiveMode, dependencies: Int, what: String) {
        self.plaintext = plaintext; self.starts = starts; self.mode = mode; self.dependencies = dependencies; self.what = what
    }

    public var count: Int { starts.count }

    /// The first record's ID (a page has at least one).
    public var firstID: [UInt8] { Array(plaintext[Int(starts[0])..<Int(starts[0]) + 16]) }

    /// Record `index`. The bytes were checked when the page was indexed and have not changed
    /// since, so this does not fail for a page `indexed` returned.
    public func record(_ index: Int) throws(FormatError) -> ManifestRecord {
        var r = BinaryReader(plaintext, at: Int(starts[index]), what: what)
        return try ManifestRecord(reading: &r, mode: mode, dependencies: dependencies)
    }
}

/// Where one page of a manifest is, and what it must be.
public struct PageDescriptor: Sendable, Equatable {
    public let firstID: [UInt8]
    public let itemCount: Int
    /// 0: the archive whose root this is; k: its `dependsOn[k − 1]`.
    public let holder: Int
    /// The page's number in its holder (`Manifest/{page}.n11page`).
    public let page: Int
    public let plaintextLength: Int
    public let sha256: [UInt8]

    public init(firstID: [UInt8], itemCount: Int, holder: Int, page: Int, plaintextLength: Int, sha256: [UInt8]) {
        self.firstID = firstID; self.itemCount = itemCount; self.holder = holder
        self.page = page; self.plaintextLength = plaintextLength; self.sha256 = sha256
    }
}

/// The root of a version 3 manifest: the page list, or "the same manifest as one of the
/// archives this one depends on" (what an unchanged night writes).
public enum ManifestRoot: Sendable, Equatable {
    case pages(PageList)
    /// `holder` ≥ 1 (`dependsOn[holder − 1]`), whose root plaintext has this SHA-256 and is
    /// itself a page list.
    case sameAs(holder: Int, rootSHA256: [UInt8])

    public struct PageList: Sendable, Equatable {
        /// Secure archives: the compartment key each chosen compartment's items are sealed under.
        public let vaultKeys: [Compartment: [UInt8]]
        public let itemCount: Int64
        public let plaintextBytes: Int64
        public let pages: [PageDescriptor]

        public init(vaultKeys: [Compartment: [UInt8]], itemCount: Int64, plaintextBytes: Int64, pages: [PageDescriptor]) {
            self.vaultKeys = vaultKeys; self.itemCount = itemCount; self.plaintextBytes = plaintextBytes; self.pages = pages
        }
    }

    public func serialized() -> [UInt8] {
        var w = BinaryWriter(capacity: 64)
        w.append(ManifestV3.rootMagic)
        switch self {
        case let .sameAs(holder, digest):
            w.byte(1)
            w.integer(holder)
            w.append(digest)
        case .pages(let list):
            w.byte(0)
            let keys = Compartment.allCases.compactMap { c in list.vaultKeys[c].map { (c, $0) } }
            w.integer(keys.count)
            for (compartment, id) in keys {
                w.byte(compartment.code)
                w.append(id)
            }
            w.integer(list.itemCount)
            w.integer(list.plaintextBytes)
            w.integer(list.pages.count)
            for page in list.pages {
                w.append(page.firstID)
                w.integer(page.itemCount)
                w.integer(page.holder)
                w.integer(page.page)
                w.integer(page.plaintextLength)
                w.append(page.sha256)
            }
        }
        return w.bytes
    }

    /// Parses a root's plaintext for an archive of `mode` that depends on `dependencies` archives.
    public init(parsing bytes: [UInt8], mode: ArchiveMode, dependencies: Int) throws(FormatError) {
        var r = BinaryReader(bytes, what: "the manifest root")
        guard try r.bytes(ManifestV3.rootMagic.count) == ManifestV3.rootMagic else { throw r.failure("not a manifest root") }
        switch try r.byte() {
        case 1:
            let holder = try r.int(atMost: dependencies, "holder")
            guard holder > 0 else { throw r.failure("an archive's manifest cannot be the same as its own") }
            self = .sameAs(holder: holder, rootSHA256: try r.bytes(32))
        case 0:
            self = .pages(try Self.pageList(&r, mode: mode, dependencies: dependencies))
        case let kind:
            throw r.failure("root kind \(kind)")
        }
        try r.end()
    }

    private static func pageList(_ r: inout BinaryReader, mode: ArchiveMode, dependencies: Int) throws(FormatError) -> PageList {
        var vaultKeys: [Compartment: [UInt8]] = [:]
        let keyCount = try r.int(atMost: mode == .secure ? Compartment.allCases.count : 0, "vault key count")
        var previous = -1
        for _ in 0..<keyCount {
            let code = try r.byte()
            guard let compartment = Compartment(code: code), Int(code) > previous else { throw r.failure("vault keys out of order") }
            previous = Int(code)
            vaultKeys[compartment] = try r.bytes(16)
        }
        let itemCount = try r.int64(atMost: Int64(ManifestV3.pages) * Int64(ManifestV3.pageItems), "item count")
        let plaintextBytes = try r.int64(atMost: Int64.max, "plaintext bytes")
        let pageCount = try r.int(atMost: ManifestV3.pages, "page count")
        var pages: [PageDescriptor] = []
        var items: Int64 = 0
        for _ in 0..<pageCount {
            let firstID = try r.bytes(16)
            let count = try r.int(atMost: ManifestV3.pageItems, "page item count")
            let holder = try r.int(atMost: dependencies, "page holder")
            let number = try r.int(atMost: ManifestV3.pages - 1, "page number")
            let length = try r.int(atMost: ManifestV3.pageBytes, "page length")
            let digest = try r.bytes(32)
            guard count > 0 else { throw r.failure("a page without items") }
            if let last = pages.last, !last.firstID.lexicographicallyPrecedes(firstID) { throw r.failure("pages out of order") }
            pages.append(PageDescriptor(firstID: firstID, itemCount: count, holder: holder, page: number, plaintextLength: length, sha256: digest))
            items += Int64(count)
        }
        guard items == itemCount else { throw r.failure("the pages hold \(items) items, not \(itemCount)") }
        return PageList(vaultKeys: vaultKeys, itemCount: itemCount, plaintextBytes: plaintextBytes, pages: pages)
    }
}
