import Foundation
import N11Container
import N11Crypto
import N11Format
import N11System
import N11Vault

/// An archive opened without any secret: the ZIP's entries are checked against the layout
/// (FORMAT.md §1) and the header is parsed and bounded (§2, §8). Nothing here is trusted
/// yet; `unlock` authenticates it.
public final class ArchiveReader {
    /// The file read.
    public let path: String
    /// What messages call it: the path, or the `REMOTE:PATH` a downloaded copy came from.
    public let name: String
    public let header: ArchiveHeader
    public let fileSize: Int64
    /// The open ZIP and its checked entries. Let go while Argon2id runs (see `unlock`).
    /// nil only while `unlock` derives a key (see `derivingWithoutContainer`).
    private var container: Container?
    /// Opened for a salvage (see `init`).
    public let salvaging: Bool
    /// Whether the entries were found by their local headers: the central directory is
    /// damaged (only in a salvage).
    public var foundByLocalHeaders: Bool { container?.zip.foundByLocalHeaders ?? false }
    /// The second entry: `keywrap.bin` (version 1) or `header.mac` (version 2).
    let keyEntry: [UInt8]
    /// Version 3: whether the header is signed and the signature (`header.sig`) verifies.
    /// Checked when the archive is opened; one that fails is refused by `unlock`, before any
    /// key is derived (as untrusted when a signer is trusted, else as damage).
    public let signature: ArchiveKeyEntries.Signature
    /// The key whose signature of the header verified; nil for an unsigned archive.
    public var signer: Ed25519PublicKey? { signature.signer }

    var zip: ZipReader { container!.zip }
    var entries: [ZipEntryInfo] { container!.entries }
    public var itemEntryCount: Int { entries.count - EntryName.fixed.count }
    /// Every entry of the ZIP.
    public var entryCount: Int { entries.count }
    /// Version 3: how many manifest pages and packs of items it holds (the number of items
    /// is in the encrypted manifest).
    public var packedLayout: (pages: Int, packs: Int)? { packedEntries.map { ($0.pages.count, $0.packs.count) } }

    private final class Container {
        let zip: ZipReader
        let entries: [ZipEntryInfo]
        let headerBytes: [UInt8]
        let keyEntry: [UInt8]
        /// Version 3: where its pages, packs and root are.
        let packed: PackedEntries?
        init(zip: ZipReader, entries: [ZipEntryInfo], headerBytes: [UInt8], keyEntry: [UInt8], packed: PackedEntries?) {
            self.zip = zip; self.entries = entries; self.headerBytes = headerBytes; self.keyEntry = keyEntry; self.packed = packed
        }
    }

    /// Version 3's entries, checked against DESIGN.md §8.2's layout.
    var packedEntries: PackedEntries? { container?.packed }

    /// A version 3 archive opened for a salvage without its manifest's root (a copy cut
    /// short): only the items of the pages that arrived can be restored, and whether it held
    /// more cannot be known (FORMAT.md §10.8). Such an archive is never taken as another's
    /// dependency (`StoreDependencies`): a whole copy of it may be beside it.
    public var manifestRootMissing: Bool { packedEntries.map { $0.root == nil } ?? false }

    /// With `salvaging` (a salvage, FORMAT.md §1.1), a ZIP that libzip cannot open, or whose
    /// central directory breaks the layout, is read again through its local headers; a
    /// failure that still stops it is `unsalvageable`.
    public convenience init(path: String, name displayName: String? = nil, salvaging: Bool = false) throws(ArchiveError) {
        let name = displayName ?? path
        let size: Int64
        do {
            guard let status = try FileStatus.of(path, followLinks: true) else { throw ArchiveError.archiveMissing(path: name) }
            switch status.kind {
            case .regular: break
            case .directory: throw ArchiveError.notAFile(path: name, what: "a directory")
            default: throw ArchiveError.notAFile(path: name, what: "a device, FIFO or socket")
            }
            size = status.size
        } catch { throw ArchiveError.reading(name, error, salvaging: salvaging) }
        try self.init(.file(path), size: size, name: name, salvaging: salvaging)
    }

    /// Reads an archive while it downloads (`ArrivingArchive`): every read waits for its
    /// bytes, and `checkWhole()` must hold before anything read becomes visible. No salvage:
    /// that walks local headers, so it waits for the whole file anyway.
    public convenience init(arriving archive: ArrivingArchive) throws(ArchiveError) {
        try self.init(.arriving(archive.file), size: archive.file.size, name: archive.name, salvaging: false)
    }

    /// Where the bytes are read from.
    private enum Source {
        case file(String)
        case arriving(ArrivingFile)

        var path: String {
            switch self {
            case .file(let path): return path
            case .arriving(let file): return file.path
            }
        }

        /// The first `count` bytes (fewer if the file is shorter).
        func prefix(_ count: Int) throws -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            let got: Int
            switch self {
            case .file(let path): got = try FileDescriptor.openForReading(path).readFully(into: &bytes, count: count)
            case .arriving(let file): got = try bytes.withUnsafeMutableBytes { try file.read(into: $0.baseAddress!, count: count, at: 0) }
            }
            return Array(bytes[0..<got])
        }
    }
    private let source: Source

    private init(_ source: Source, size: Int64, name: String, salvaging: Bool) throws(ArchiveError) {
        self.source = source
        self.path = source.path
        self.name = name
        self.salvaging = salvaging
        fileSize = size
        do {
            let prefix = try source.prefix(64 << 10)
            guard prefix.count >= 4, Array(prefix[0..<4]) == [0x50, 0x4B, 0x03, 0x04] else {
                throw ArchiveError.notAnArchive(archive: name, why: "it is not a ZIP file")
            }
            // The version first (FORMAT.md §2): a later version's new entries or fields are
            // not damage, and it is reported as unsupported before they are looked at.
            let declared = ZipPrefix.firstEntry(of: prefix).flatMap { first in
                first.name == EntryName.header ? ArchiveHeader.declaredVersion(first.data) : nil
            }
            if let declared, !(1...3).contains(declared) { throw FormatError.unsupportedVersion(declared) }
            let opened = try Self.openContainer(source, salvaging: salvaging, packed: declared == 3)
            container = opened
            header = try ArchiveHeader(parsing: opened.headerBytes)
            try ArchiveKeyEntries.checkSlots(of: header)
            keyEntry = opened.keyEntry
            // The second entry's name must be the one of the header's version, and the layout
            // the header's version's (a version 3 header in a version 2 layout is damage).
            guard opened.entries[1].name == EntryName.second(version: header.version).name,
                  (header.version == 3) == (opened.packed != nil) else {
                throw FormatError.invalidEntryName(opened.entries[1].name)
            }
            if let packed = opened.packed {
                // Said before any key is asked for: only a portable archive's pages are read
                // without their root (FORMAT.md §10.8).
                guard packed.root != nil || header.mode == .portable else {
                    throw FormatError.invalidManifest("there is no \(EntryName.manifestRoot) (the archive's last entry: is it a copy cut short?), and a secure archive's root names the keys its items are sealed under")
                }
                signature = try Self.checkSignature(of: header, entry: packed.signatureEntry, in: opened.zip)
            } else {
                signature = .unsigned
            }
        } catch let failure as SalvageFailure {
            throw ArchiveError.unsalvageable(archive: name, what: .found(failure.description))
        } catch { throw ArchiveError.reading(name, error, salvaging: salvaging) }
    }

    /// For an archive read as it downloads: waits for the rest of it and checks the whole
    /// file's ZIP (`ZipReader.checkWhole`). Nothing for a file that was whole. Every reading
    /// of items ends with this (`ArchiveVerifier.forEachItem`), before anything is published.
    func checkWhole() throws(ArchiveError) {
        guard case .arriving = source else { return }
        guard let zip = container?.zip else { throw ArchiveError.damaged(archive: name, what: "the archive was not open to be checked whole") }
        do { try zip.checkWhole() } catch let error as ArchiveError { throw error } catch { throw ArchiveError.reading(name, error, salvaging: false) }
    }

    /// Opens the ZIP through its central directory; when `salvaging` and that fails (the ZIP
    /// does not open, or its directory breaks the layout), through its local headers instead.
    private static func openContainer(_ source: Source, salvaging: Bool, packed: Bool) throws -> Container {
        let path: String
        switch source {
        case .arriving(let file):
            let zip = try ZipReader(arriving: file)
            return packed ? try openPacked(zip, salvaging: false) : try openContainer(zip, salvaging: false)
        case .file(let file): path = file
        }
        do {
            return packed ? try openPacked(ZipReader(path: path), salvaging: false) : try openContainer(ZipReader(path: path), salvaging: false)
        } catch where salvaging && (error is ContainerError || error is FormatError) {
            // Version 3 in a ZIP that opens: its entries found by name (a pack missing, say)
            // before anything is looked for by local headers.
            if packed, let zip = try? ZipReader(path: path), let container = try? openPacked(zip, salvaging: true) { return container }
            do {
                let zip = try ZipReader(scanningLocalHeadersOf: path, maximumEntries: EntryName.fixed.count + FormatLimits.items,
                                        accepting: EntryName.isInLayout)
                return packed ? try openPacked(zip, salvaging: true) : try openContainer(zip, salvaging: true)
            } catch let scanFailure {
                throw SalvageFailure(directory: error, localHeaders: scanFailure)
            }
        }
    }

    /// Neither the central directory nor the local headers give the archive's layout.
    struct SalvageFailure: Error, CustomStringConvertible {
        let directory: any Error
        let localHeaders: any Error
        var description: String {
            "its ZIP directory does not read (\(directory)), and its local headers do not give the entries that authenticate the rest either (\(localHeaders))"
        }
    }

    /// Checks `zip`'s entries against the layout (FORMAT.md §1, §8). From a local-header scan
    /// (`salvaging`) the first of two entries of one name is kept: the scan only took names
    /// of the layout, and an item's bytes authenticate under its name or not at all.
    private static func openContainer(_ zip: ZipReader, salvaging: Bool) throws -> Container {
        let count = zip.entryCount
        guard count >= EntryName.fixed.count else { throw FormatError.notAnArchive("\(count) entries") }
        guard count <= EntryName.fixed.count + FormatLimits.items else {
            throw FormatError.limitExceeded("\(count) entries (at most \(EntryName.fixed.count + FormatLimits.items))")
        }
        var entries: [ZipEntryInfo] = []
        entries.reserveCapacity(count)
        var names = Set<String>()
        for index in 0..<count {
            let entry = try zip.entry(at: index)
            if index == 1 {
                // Which of the two the header's version wants is checked once it is parsed.
                guard entry.name == EntryName.keyWrap || entry.name == EntryName.headerMAC else {
                    throw FormatError.invalidEntryName(entry.name)
                }
            } else if index < EntryName.fixed.count {
                guard entry.name == EntryName.fixed[index] else {
                    throw index == 0 ? FormatError.notAnArchive("first entry is not \(EntryName.header)") : FormatError.invalidEntryName(entry.name)
                }
            } else {
                // A later entry of a name found already (a header or manifest too: a download
                // appended to itself) is ignored in a salvage (FORMAT.md §1.1).
                if salvaging && (names.contains(entry.name) || (try? EntryName.parseItem(entry.name)) == nil) { continue }
                _ = try EntryName.parseItem(entry.name)
            }
            guard names.insert(entry.name).inserted else {
                throw FormatError.invalidManifest("entry '\(entry.name)' appears twice")
            }
            entries.append(entry)
        }
        guard entries[0].size <= Int64(FormatLimits.headerBytes) else { throw FormatError.limitExceeded("header of \(entries[0].size) bytes") }
        let keyEntrySize = entries[1].name == EntryName.keyWrap ? FormatLimits.keyWrapBytes : FormatLimits.headerMACBytes
        guard entries[1].size == Int64(keyEntrySize) else { throw FormatError.invalidHeader("\(entries[1].name) of \(entries[1].size) bytes") }
        guard let manifestPayload = FormatLimits.payloadLength(sealedLength: entries[2].size) else {
            throw FormatError.invalidManifest("an entry of \(entries[2].size) bytes is no sealed stream")
        }
        guard manifestPayload <= FormatLimits.manifestBytes else {
            throw FormatError.limitExceeded("manifest of \(manifestPayload) bytes (at most \(FormatLimits.manifestBytes))")
        }
        return Container(zip: zip, entries: entries, headerBytes: try readSmall(entries[0], from: zip),
                         keyEntry: try readSmall(entries[1], from: zip), packed: nil)
    }

    /// A version 3 ZIP: its entries in DESIGN.md §8.2's layout (found by name in a salvage),
    /// the header and MAC read.
    private static func openPacked(_ zip: ZipReader, salvaging: Bool) throws -> Container {
        var entries: [ZipEntryInfo] = []
        for index in 0..<zip.entryCount { entries.append(try zip.entry(at: index)) }
        let packed = try PackedEntries(entries, salvaging: salvaging)
        guard entries[0].size <= Int64(FormatLimits.headerBytes) else { throw FormatError.limitExceeded("header of \(entries[0].size) bytes") }
        guard entries[1].size == Int64(FormatLimits.headerMACBytes) else { throw FormatError.invalidHeader("\(entries[1].name) of \(entries[1].size) bytes") }
        return Container(zip: zip, entries: entries, headerBytes: try readSmall(entries[0], from: zip),
                         keyEntry: try readSmall(entries[1], from: zip), packed: packed)
    }

    /// Argon2id's memory is the peak of a portable verify or restore, and with 100,000 items
    /// libzip's central directory (about half a KiB an entry) pushed that peak past the bound
    /// (Argon2id + 64 MiB). So the ZIP is closed while the key is derived and opened again
    /// after, and its heap handed back to the system. The second opening must show the same
    /// header and key wrap: the key is derived from the first, and everything read later is
    /// authenticated under it.
    func derivingWithoutContainer(_ derive: () throws -> SecureBytes) throws -> SecureBytes {
        container = nil
        Heap.releaseFreePages()
        let result: SecureBytes
        do { result = try derive() } catch {
            container = try? Self.openContainer(source, salvaging: salvaging, packed: header.version == 3)
            throw error
        }
        let reopened = try Self.openContainer(source, salvaging: salvaging, packed: header.version == 3)
        guard reopened.headerBytes == header.bytes, reopened.keyEntry == keyEntry else {
            throw ArchiveError.damaged(archive: name, what: "the archive changed while it was being read")
        }
        container = reopened
        return result
    }

    static let signatureContext = Array("n11archive/v3/header-signature".utf8) + [0]

    /// Whether `header.sig` verifies over the header's exact bytes (DESIGN.md §8.4). A
    /// signature without a signer is damage; a signer whose signature is missing or fails is
    /// `.invalid`, which `unlock` refuses (so that a trust check can call it untrusted).
    private static func checkSignature(of header: ArchiveHeader, entry: ZipEntryInfo?, in zip: ZipReader) throws -> ArchiveKeyEntries.Signature {
        switch (header.signer, entry) {
        case (nil, nil): return .unsigned
        case (nil, _?): throw FormatError.invalidHeader("a \(EntryName.headerSignature) without a signer")
        case (_?, nil): return .invalid
        case let (signer?, entry?):
            let key = try Ed25519PublicKey(bytes: signer)
            return key.verifies(try readSmall(entry, from: zip), of: signatureContext + header.bytes) ? .verified(key) : .invalid
        }
    }

    /// Reads a small entry to its end: libzip checks an entry's CRC-32 only when a read
    /// reaches the end, and a CRC failure here tells disk damage apart from a wrong password.
    static func readSmall(_ entry: ZipEntryInfo, from zip: ZipReader) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: Int(entry.size) + 1)
        let n = try zip.open(entry).readFully(into: &bytes, count: bytes.count)
        guard n == Int(entry.size) else { throw ContainerError.entryReadFailed(name: entry.name, cause: .wrongLength) }
        return Array(bytes[0..<n])
    }

    /// Authenticates the archive: derives or looks up the KEK, unwraps the content key,
    /// decrypts and checks the manifest, and matches the ZIP entries against it.
    /// `password` is asked only for portable archives, `keyStore` only for secure ones.
    /// A portable archive whose Argon2id memory is above `kdfCeiling` is refused before the
    /// password is asked for and before any key derivation runs. With `toleratingMissingItems`
    /// (a salvage) an item whose entry is gone or has the wrong size does not stop the
    /// archive from opening: reading it fails as damage.
    ///
    /// An incremental archive needs `dependencies`, one per `dependsOn` (nil: missing, in a
    /// salvage), opened by `unlock(with:)`.
    public func unlock(password: () throws -> SecureBytes?, keyStore: () throws -> KeyStore,
                       identities: () throws -> [P256PrivateKey] = { [] },
                       kdfCeiling: KDFCeiling = .standard, kdfCache: KDFCache? = nil,
                       toleratingMissingItems: Bool = false) throws(ArchiveError) -> UnlockedArchive {
        try unlock(password: password, keyStore: keyStore, identities: identities, kdfCeiling: kdfCeiling, kdfCache: kdfCache,
                   toleratingMissingItems: toleratingMissingItems, dependencies: nil)
    }

    func unlock(password: () throws -> SecureBytes?, keyStore: () throws -> KeyStore,
                identities: () throws -> [P256PrivateKey], kdfCeiling: KDFCeiling, kdfCache: KDFCache?,
                toleratingMissingItems: Bool, dependencies: (() throws -> [OpenedDependency?])?) throws(ArchiveError) -> UnlockedArchive {
        do {
            guard header.dependsOn.isEmpty || dependencies != nil else {
                throw ArchiveError.unsupported(archive: name, why: "it is an incremental archive: reading it needs the \(header.dependsOn.count) archive(s) it depends on, where it lies")
            }
            let opened = try keyEntries.unwrapContentKey(password: password, keyStore: keyStore, identities: identities,
                                                         kdfCeiling: kdfCeiling, kdfCache: kdfCache, derive: derivingWithoutContainer)
            let contentKey = opened.key
            if let packed = packedEntries {
                let contents = try PackedContents(reading: packed, of: self, contentKey: contentKey,
                                                  dependencies: header.dependsOn.isEmpty ? [] : try dependencies?() ?? [],
                                                  salvaging: toleratingMissingItems)
                return UnlockedArchive(reader: self, items: ArchiveItems(contents), contentKey: contentKey, entryIndices: [],
                                       packed: contents)
            }
            let manifestKey = try ArchiveKeys.entryKey(contentKey: contentKey, header: header, entryName: EntryName.manifest)
            let manifestSource = BoundedReader(try ChunkedOpeningSource(zip.open(entries[2]), key: manifestKey))
            let manifest = try Manifest(parsing: try manifestSource.readAll(limit: Int(FormatLimits.manifestBytes)), header: header)
            let byName = toleratingMissingItems || foundByLocalHeaders
            let entryIndices = byName ? entriesByName(for: manifest) : try entriesInOrder(for: manifest)
            return UnlockedArchive(reader: self, items: ArchiveItems(manifest), contentKey: contentKey, entryIndices: entryIndices,
                                   version1PasswordSlot: opened.version1PasswordSlot)
        } catch { throw ArchiveError.reading(name, error, salvaging: toleratingMissingItems) }
    }

    /// The authenticated manifest decides which entries must exist, in which order.
    private func entriesInOrder(for manifest: Manifest) throws -> [Int?] {
        guard manifest.items.count == itemEntryCount else {
            throw FormatError.invalidManifest("the manifest lists \(manifest.items.count) items but the archive holds \(itemEntryCount)")
        }
        for (item, entry) in Swift.zip(manifest.items, entries.dropFirst(EntryName.fixed.count)) {
            guard item.entry == entry.name else { throw FormatError.invalidManifest("entry '\(entry.name)' is not where the manifest puts it") }
            guard item.sealedSize == entry.size else { throw FormatError.invalidManifest("entry '\(entry.name)' has the wrong size") }
        }
        return manifest.items.indices.map { EntryName.fixed.count + $0 }
    }

    /// Each item's entry found by name (a salvage): nil where it is missing or has the wrong
    /// size. Entries the manifest does not list are never read.
    private func entriesByName(for manifest: Manifest) -> [Int?] {
        var byName: [String: Int] = [:]
        for index in entries.indices.dropFirst(EntryName.fixed.count) { byName[entries[index].name] = index }
        return manifest.items.map { item in
            guard let index = byName[item.entry], entries[index].size == item.sealedSize else { return nil }
            return index
        }
    }
}

extension ArchiveReader {
    /// Checks that this archive opens with the given password, identities or key store: the
    /// content key unwraps and so the header is authenticated (its mode, ID, creation time and
    /// slots: version 1 as the key wrap's associated data, version 2 by `header.mac`). Reads
    /// no item and not the manifest. Returns the kind of slot that opened it: only a password
    /// or device slot says who made the archive (`ArchiveKeyEntries.OpenedBy`).
    @discardableResult
    public func authenticate(password: () throws -> SecureBytes?, keyStore: () throws -> KeyStore,
                             identities: () throws -> [P256PrivateKey] = { [] },
                             kdfCeiling: KDFCeiling = .standard, kdfCache: KDFCache? = nil) throws(ArchiveError) -> ArchiveKeyEntries.OpenedBy {
        do {
            return try keyEntries.unwrapContentKey(password: password, keyStore: keyStore, identities: identities,
                                                   kdfCeiling: kdfCeiling, kdfCache: kdfCache, derive: derivingWithoutContainer).openedBy
        } catch { throw ArchiveError.reading(name, error) }
    }

    /// The two entries that open the content key, as read from this file.
    var keyEntries: ArchiveKeyEntries {
        ArchiveKeyEntries(header: header, keyEntry: keyEntry, name: name, signature: signature)
    }

}

/// An archive's items in manifest order: version 1 and 2's manifest, held whole (it is one
/// document, bounded by FORMAT.md §8), or version 3's pages, read one at a time when an item
/// of theirs is asked for (issue 34). Safe to use from the payload reader's thread and the
/// caller's at once.
public final class ArchiveItems: @unchecked Sendable {
    private enum Storage {
        case whole([Manifest.Item])
        case paged(PackedContents)
    }
    private let storage: Storage
    public let count: Int
    public let plaintextBytes: Int64
    /// Secure archives: the compartment key each compartment's item files are sealed under.
    public let vaultKeys: [Compartment: [UInt8]]?

    init(_ manifest: Manifest) {
        storage = .whole(manifest.items)
        count = manifest.items.count
        plaintextBytes = manifest.items.reduce(0) { $0 + $1.size }
        vaultKeys = manifest.vaultKeys
    }

    init(_ contents: PackedContents) {
        storage = .paged(contents)
        count = contents.itemCount
        plaintextBytes = contents.plaintextBytes
        vaultKeys = contents.vaultKeys
    }

    public var isEmpty: Bool { count == 0 }
    public var indices: Range<Int> { 0..<count }

    /// Item `index`. A version 3 page is read again and checked against the root.
    public func item(_ index: Int) throws(ArchiveError) -> Manifest.Item {
        switch storage {
        case .whole(let items): return items[index]
        case .paged(let contents):
            do { return try contents.item(at: index).item }
            catch let error as ArchiveError { throw error }
            catch { throw ArchiveError.reading(contents.own.reader.name, error, salvaging: false) }
        }
    }

    /// Each item in order, a page at a time.
    public func forEach(_ body: (Int, Manifest.Item) throws -> Void) throws {
        for index in indices { try body(index, try item(index)) }
    }

    /// Every item at once: for what needs them all (a listing of a version 1 or 2 archive,
    /// sorted; tests).
    public func all() throws(ArchiveError) -> [Manifest.Item] {
        if case .whole(let items) = storage { return items }
        var items: [Manifest.Item] = []
        items.reserveCapacity(count)
        for index in indices { items.append(try item(index)) }
        return items
    }
}

/// An archive whose content key and manifest are authenticated.
public final class UnlockedArchive {
    public let reader: ArchiveReader
    public let items: ArchiveItems
    let contentKey: SecureBytes
    /// Each manifest item's ZIP entry; nil for one missing from a salvaged archive.
    let entryIndices: [Int?]
    /// A version 1 portable archive's password as a version 2 slot (`ArchiveKeyEntries.OpenedKey`).
    let version1PasswordSlot: ArchiveHeader.KeySlot?
    /// Version 3: where each item's payload is in the packs.
    let packed: PackedContents?

    init(reader: ArchiveReader, items: ArchiveItems, contentKey: SecureBytes, entryIndices: [Int?],
         version1PasswordSlot: ArchiveHeader.KeySlot? = nil, packed: PackedContents? = nil) {
        self.reader = reader
        self.items = items
        self.contentKey = contentKey
        self.entryIndices = entryIndices
        self.version1PasswordSlot = version1PasswordSlot
        self.packed = packed
    }

    public var header: ArchiveHeader { reader.header }

    /// A salvage without the manifest's root (`ArchiveReader.manifestRootMissing`): how many
    /// manifest pages were read, and why the next was not.
    public var pagesReadWithoutRoot: (read: Int, stopped: String)? { packed?.pagesWithoutRoot }

    /// A salvage: the manifest pages the root lists that are missing or do not read; their
    /// items are not in `items` (FORMAT.md §10.8).
    public var lostPages: [LostPage] { packed?.lostPages ?? [] }

    /// The payloads of items `indices`, in that order, read and decrypted on a second thread
    /// while the caller hashes and writes them on its own (see `ReadAhead`). From `start()`
    /// until `finish()` only the worker may use this archive's ZIP reader.
    func payloads<Indices: RandomAccessCollection<Int>>(_ indices: Indices) -> ReadAhead where Indices.Index == Int {
        // Each entry key goes into one reused locked buffer: the opener copies it into its
        // cipher context when it is made, before the next derivation.
        if let packed {
            let cursor = PackCursor(packed, archive: self)
            // Every item is a stream and takes a block of its own: 64 blocks of 32 KiB (the
            // same 2 MiB as 8 of 256 KiB) hand small items over 32 at a time, not 4.
            return ReadAhead(count: indices.count, blockSize: 32 << 10, blocks: 64) { n in try cursor.payload(of: indices[indices.startIndex + n]) }
        }
        let keySlot = try? SecureBytes(count: 32)
        return ReadAhead(count: indices.count) { [self] n in
            guard let keySlot else { throw CryptoError.library("sodium_malloc") }
            return try payload(of: indices[indices.startIndex + n], keySlot: keySlot)
        }
    }

    /// An item's payload, released chunk by chunk only as each chunk's tag verifies.
    private func payload(of index: Int, keySlot: SecureBytes) throws -> ByteSource {
        let item = try items.item(index)
        guard let entryIndex = entryIndices[index] else {
            throw ArchiveError.damaged(archive: reader.name, what: "the entry '\(item.entry)' is missing or has the wrong size")
        }
        let entry = reader.entries[entryIndex]
        try ArchiveKeys.entryKey(contentKey: contentKey, header: header, entryName: item.entry, into: keySlot)
        // Every byte of an item entry is authenticated by its chunk tags: no CRC pass.
        return try ChunkedOpeningSource(reader.zip.open(entry, checkCRC: false), key: keySlot)
    }
}

/// Reads a small verified stream to its end, refusing more than a limit.
struct BoundedReader {
    let source: ByteSource
    init(_ source: ByteSource) { self.source = source }

    func readAll(limit: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = try source.read(into: &buffer, offset: 0, count: buffer.count)
            if n == 0 { return out }
            guard out.count + n <= limit else { throw FormatError.limitExceeded("manifest larger than \(limit) bytes") }
            out.append(contentsOf: buffer[0..<n])
        }
    }

    /// Reads a stream whose length is known (a manifest page's, from its authenticated
    /// descriptor, at most `ManifestV3.pageBytes`) into one array of that size. Read by
    /// `readAll(limit:)`, a page of 2 MiB grew by doubling to a capacity of up to 4 MiB, and
    /// the largest page grows with the number of pages: at 3,000,000 items the pages a reader
    /// keeps took 1.2 MB more than at 100,000 (issue 34). Returns fewer bytes if the stream is
    /// shorter (the caller compares); throws if it is longer.
    func readAll(expecting count: Int) throws -> [UInt8] {
        // One byte more than expected finds a stream that goes on.
        var out = [UInt8](repeating: 0, count: count + 1)
        var filled = 0
        while filled < out.count {
            let n = try source.read(into: &out, offset: filled, count: out.count - filled)
            if n == 0 { break }
            filled += n
        }
        guard filled <= count else { throw FormatError.limitExceeded("manifest page larger than the \(count) bytes its descriptor gives") }
        out.removeLast(out.count - filled)
        return out
    }
}

/// The most Argon2id work this machine spends on unlocking one archive. A header is not
/// authenticated until its key is derived, so anyone who can put a file where an unattended
/// `prune` or `restore` reads can ask for 1 GiB and 32 passes per slot, in four slots; the
/// format allows that much (FORMAT.md §8), this ceiling decides what is spent here: the
/// memory of any one slot, and the work of all of an archive's password slots together
/// (passes × MiB, summed). Raised per command with `--allow-kdf-memory MIB` (or
/// `N11_ALLOW_KDF_MEMORY`), which raises both.
public struct KDFCeiling: Sendable, Equatable {
    public let memoryMiB: UInt64

    /// Twice the moderate profile that `create` uses by default.
    public static let standardMemoryMiB: UInt64 = 512
    public static let standard = KDFCeiling(memoryMiB: standardMemoryMiB)
    /// Work over all slots of one archive, in passes at the memory ceiling: 32 × 512 MiB is
    /// the most one slot within the memory ceiling can ask for (`create` never makes more),
    /// and room for four password slots of the moderate profile (3 passes × 256 MiB) many
    /// times over, while a planted file with four 32-pass slots at the ceiling is refused.
    public static let passesAtCeiling: UInt64 = 32

    public init(memoryMiB: UInt64) { self.memoryMiB = memoryMiB }

    /// The passes × MiB of all of an archive's password slots together that may be spent.
    public var workMiBPasses: UInt64 { memoryMiB * Self.passesAtCeiling }

    func check(_ kdf: ArchiveHeader.KDF, archive: String) throws(ArchiveError) {
        guard kdf.memoryKiB <= memoryMiB << 10 else {
            throw .kdfAboveCeiling(archive: archive, opsLimit: kdf.opsLimit, memoryMiB: (kdf.memoryKiB + 1023) >> 10, ceilingMiB: memoryMiB)
        }
    }

    /// The passes × MiB of all of `header`'s password slots together.
    public static func work(of header: ArchiveHeader) -> UInt64 {
        work(header.slots.compactMap { if case .password(let kdf, _) = $0 { return kdf } else { return nil } } + (header.kdf.map { [$0] } ?? []))
    }

    static func work(_ kdfs: [ArchiveHeader.KDF]) -> UInt64 {
        kdfs.reduce(UInt64(0)) { $0 + $1.opsLimit * (($1.memoryKiB + 1023) >> 10) }
    }

    /// Checks every slot's memory, then their work together, before anything is derived.
    func check(_ kdfs: [ArchiveHeader.KDF], archive: String) throws(ArchiveError) {
        for kdf in kdfs { try check(kdf, archive: archive) }
        let work = Self.work(kdfs)
        guard work <= workMiBPasses else {
            throw .kdfWorkAboveCeiling(archive: archive, slots: kdfs.count, workMiBPasses: work, ceilingMiBPasses: workMiBPasses)
        }
    }
}

/// Key-encryption keys derived during one command with one password, by salt and cost: an
/// archive checked twice (prune counts it, then verifies it) or slots that repeat a salt cost
/// one Argon2id, not one each. The keys live in locked memory until the command ends.
public final class KDFCache {
    private var keys: [String: SecureBytes] = [:]

    public init() {}

    /// Forgets every key: the password they came from turned out wrong.
    public func forget() { keys.removeAll() }

    /// The key for `kdf`'s salt and cost: `derive`d the first time, remembered after.
    public func kek(for kdf: ArchiveHeader.KDF, derive: () throws -> SecureBytes) rethrows -> SecureBytes {
        let key = "\(kdf.salt)/\(kdf.opsLimit)/\(kdf.memoryKiB)/\(kdf.parallelism)"
        if let known = keys[key] { return known }
        let derived = try derive()
        keys[key] = derived
        return derived
    }
}
