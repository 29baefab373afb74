import Foundation
import N11Crypto
import N11Format
import N11System
import Synchronization

/// A change to a vault that becomes visible all at once, even if the process is killed
/// (DESIGN.md §4; FORMAT.md, Appendix A). The change's rows go into one catalogue
/// transaction, open from the start: records put or deleted, and the file steps (moves into
/// place, removals) as `pending` rows. Content files are written before the transaction
/// that references them commits:
///
/// - a new item's (no row has its ID) straight to its final path, `Photos/{ID}.n11` or
///   `Notes/{ID}.n11note`: no row references it yet, so no reader looks at it, and a
///   rename per item is saved (most of the cost of adding or restoring small items);
/// - a replacement's out of sight in `.n11staging-XXXX/` inside the vault (same file system,
///   so publishing is a rename, a pending `move` row), since its final path is in use.
///
/// `commit()` makes the written files durable (one syncfs), commits the transaction,
/// carries out the steps, and clears them. The transaction's COMMIT is the commit point:
///
/// - killed before it: SQLite drops the transaction; the staging directory, made durable
///   before the first content file, tells the next writer that files may lie in Photos/
///   and Notes/ that no row references, and it deletes them, then the staging directory;
///   the vault is as it was;
/// - killed after it: readers already see the new rows (and read moved content where the
///   pending rows say it is), and the next writer carries out the steps (each idempotent).
///
/// Written files are ciphertext under the vault's keys, never plaintext.
public final class VaultStaging {
    static let prefix = ".n11staging-"
    /// A v1 vault's commit journal, inside its staging directory (`recoverVersion1`).
    static let journalName = "commit"

    public let vault: Vault
    public let directory: String
    private let catalogue: VaultCatalogue
    private var finished = false
    /// New items' content files at their final paths, removed if the change does not commit.
    private let createdFiles: CreatedFiles
    /// Where content files are created, for whichever thread creates them.
    private let places: ContentPlaces
    /// Creates and writes small new items' files beside the add or the restore (`writeBeside`);
    /// started by the first such item.
    private var contentWriters = SerialWorkerPool()
    /// The commit point's syncfs, opened before the change writes anything (`FileSystemSync`
    /// says why), and the writeback started with the first content file.
    let fileSystem: FileSystemSync
    /// Files `contentWriters` wrote in the staging directory because their final path was
    /// taken; `waitForWrites` adds their moves.
    private let displaced = Displaced()
    /// New items' rows (`stageNew`'s, and `stage`'s of an item that replaces none), put
    /// into the catalogue in ID order by `waitForWrites` (before the commit, or before the
    /// duplicate check looks one of them up) instead of one at a time: IDs are random,
    /// so each row went to a random page of the B-tree, and once the catalogue outgrew its
    /// cache (`VaultCatalogue.changeCacheBytes`) each cost a page read and a dirty page
    /// written to the WAL (1,000,000 notes: 28 s of an 86 s add with a 32 MiB cache,
    /// BENCHMARKS.md). Sorted, the rows past the cache go in in
    /// one pass over the tree; rows that came in ID order (a restore's) are not held back.
    /// Sealed records only, spooled sealed again. Rows of the same
    /// ID are never both held back and put or deleted directly in one change: what puts or
    /// deletes a row directly first puts those held back (`putHeldBackRows`).
    private var newRows: ExternalSorter<NewRow>?
    /// About how large the catalogue has grown in this change, while rows still go straight in.
    private var catalogueBytes: Int64?
    /// The last new row's ID, and whether every new row so far came in ascending ID order (a
    /// restore's do: an archive's pages are in ID order).
    private var newRowOrder: (last: String, ascending: Bool) = ("", true)
    /// Whether the staging directory is durable, so a crash's leftovers will be swept.
    private var markedForSweep = false
    /// Removes the staging directory if Ctrl-C or SIGTERM comes before the commit point.
    private var interruptCleanup: Interruption.Token?

    /// One step of a commit, as the journal records it (paths relative to the vault).
    enum Operation: Equatable {
        case move(staged: String, to: String)
        case remove(String)
        /// A key rotation's switch: the key store's pending keys with these IDs become current
        /// (`KeyStore.promote`). Part of the journal, so that it happens if and only if the
        /// re-encrypted items appear, and before anything is written under the old keys again.
        case promoteKeys([Compartment: [UInt8]])
        /// A v1 vault's migration, after its commit point: the record files and `Meta/` go,
        /// the `Meta` file takes its place (`MetaDirectory.finishMigration`).
        case finishMigration

        var line: String {
            switch self {
            case let .move(from, to): return "move \(from) \(to)"
            case let .remove(path): return "remove \(path)"
            case .finishMigration: return "finish-migration"
            case let .promoteKeys(ids):
                return (["keys"] + Compartment.allCases.compactMap { c in ids[c].map { "\(c.rawValue)=\($0.hex)" } })
                    .joined(separator: " ")
            }
        }

        init?(line: Substring) {
            let words = line.split(separator: " ", omittingEmptySubsequences: false)
            switch (words.first, words.count) {
            case ("move", 3): self = .move(staged: String(words[1]), to: String(words[2]))
            case ("remove", 2): self = .remove(String(words[1]))
            case ("finish-migration", 1): self = .finishMigration
            case ("keys", 2...4):
                var ids: [Compartment: [UInt8]] = [:]
                for word in words.dropFirst() {
                    let parts = word.split(separator: "=", omittingEmptySubsequences: false)
                    guard parts.count == 2, let compartment = Compartment(rawValue: String(parts[0])),
                          ids[compartment] == nil, let id = [UInt8](hex: String(parts[1]), length: 16) else { return nil }
                    ids[compartment] = id
                }
                self = .promoteKeys(ids)
                return
            default: return nil
            }
            // Steps are written by this code, so only the exact shapes it writes are accepted:
            // nothing that could name a place outside the vault's own layout.
            switch self {
            case let .move(staged, target):
                guard let source = Self.stagedFile(staged), Self.isLayoutFile(target, forStaged: source) else { return nil }
            case let .remove(path):
                guard Self.isLayoutFile(path, forStaged: nil) else { return nil }
            case .promoteKeys, .finishMigration: break
            }
        }

        /// `.n11staging-{12 hex}/NAME`: NAME is `marker` or an item's staged content (or a v1
        /// record): `{ID}.n11.content`, `{ID}.n11note.content`, `{ID}.content`, `{ID}.meta`.
        static func stagedFile(_ path: String) -> (directory: String, name: String)? {
            let parts = path.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0].hasPrefix(VaultStaging.prefix) else { return nil }
            let random = parts[0].dropFirst(VaultStaging.prefix.count)
            guard random.count == 12, random.allSatisfy(\.isHexDigit) else { return nil }
            let name = String(parts[1])
            guard name == "marker" || [".n11.content", ".n11note.content", ".content", ".meta"].contains(where: { suffix in
                name.hasSuffix(suffix) && EntryName.isCanonicalID(String(name.dropLast(suffix.count)))
            }) else { return nil }
            return (String(parts[0]), name)
        }

        /// A file of the vault's layout a step may write or remove: `Photos/{ID}.n11`,
        /// `Notes/{ID}.n11note`, a v1 record `Meta/{ID}.n11meta`, and the marker (only as the
        /// target of a staged `marker`).
        static func isLayoutFile(_ path: String, forStaged source: (directory: String, name: String)?) -> Bool {
            if path == Vault.markerName { return source?.name == "marker" }
            guard source?.name != "marker" else { return false }
            let parts = path.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2 else { return false }
            let folders = ItemKind.allCases.map { ($0.directory, $0.fileExtension) } + [(MetaDirectory.name, MetaDirectory.recordExtension)]
            return folders.contains { folder, fileExtension in
                parts[0] == folder && parts[1].hasSuffix("." + fileExtension)
                    && EntryName.isCanonicalID(String(parts[1].dropLast(fileExtension.count + 1)))
            }
        }
    }

    public init(vault: Vault) throws(VaultError) {
        precondition(vault.isWritable, "staging needs the vault opened for writing")
        guard let catalogue = vault.catalogue else { preconditionFailure("a writer's vault has its catalogue") }
        self.vault = vault
        self.catalogue = catalogue
        do { fileSystem = try FileSystemSync(containing: vault.path) } catch { throw VaultError.wrap(error) }
        directory = Path.join(vault.path, Self.prefix + SecureRandom.bytes(6).hex)
        createdFiles = CreatedFiles(spillingTo: Path.join(directory, "created"))
        places = ContentPlaces(vaultPath: vault.path, stagingDirectory: directory, createdFiles: createdFiles)
        // Registered before the directory exists, so no moment has it without its cleanup.
        let staged = directory, createdFiles = createdFiles
        interruptCleanup = Interruption.onInterrupt {
            createdFiles.removeAll()
            Directory.removePrivateTree(staged)
        }
        do {
            // Inside `critical`, as an export's staging: made after the cleanup had run, it
            // would outlive the process (the next writer sweeps it, but a run should not need that).
            try Interruption.critical { try Directory.ensure(directory, mode: 0o700) }
            try catalogue.beginChange()
        } catch {
            discard()
            throw VaultError.wrap(error)
        }
    }

    deinit { if !finished { discard() } }

    /// What a staged item will be; the content tag comes from writing it.
    public struct Description {
        public let id: String, kind: ItemKind, compartment: Compartment, name: String
        public let created: Date, expires: Date?, size: Int64, sha256: String
        public init(id: String, kind: ItemKind, compartment: Compartment, name: String, created: Date,
                    expires: Date?, size: Int64, sha256: String) {
            self.id = id; self.kind = kind; self.compartment = compartment; self.name = name
            self.created = created; self.expires = expires; self.size = size; self.sha256 = sha256
        }
        /// The plaintext digest as bytes (empty if the hex is malformed, which then fails every check).
        var sha256Bytes: [UInt8] { [UInt8](hex: sha256, length: 32) ?? [] }
    }

    /// Stages an item from its plaintext (a portable archive's payload), sealed under the
    /// compartment's key; its length and digest are checked as the last byte is read.
    /// `replaces` is the live item it will replace.
    @discardableResult
    public func stage(_ item: Description, replaces: ItemMetadata?, sealing plaintext: ByteSource) throws -> ItemMetadata {
        try stage(item, replaces: replaces) { sink, key in
            try SealedVaultItem.seal(plaintext, as: item, key: key, to: sink)
        }
    }

    /// Stages an item from a sealed item file made elsewhere (a secure archive's payload),
    /// copied as it is while its tag, length and digest are checked. An item sealed under a
    /// retired key (`sealedUnder`, from an archive made before a key rotation) is sealed anew
    /// under the current key instead: the vault holds nothing under a retired key.
    @discardableResult
    public func stage(_ item: Description, replaces: ItemMetadata?, copyingSealed sealed: ByteSource,
                      sealedUnder openKey: SecureBytes) throws -> ItemMetadata {
        try stage(item, replaces: replaces) { sink, key in
            // `KeyStore.key(for:id:)` hands out the ring's own current key, so identity says
            // "the current key"; anything else is sealed anew, which is always correct.
            if openKey === key { return try SealedVaultItem.check(CopyingSource(sealed, to: sink), as: item, key: key) }
            return try SealedVaultItem.reseal(sealed, as: item, openKey: openKey, key: key, to: sink)
        }
    }

    /// Stages `item` sealed anew under `key` (a key rotation's new key): content and
    /// record, both under that key, its tag and digest checked on the way.
    func stage(_ item: SealedVaultItem, resealedUnder key: SecureBytes, progress: VaultChangeProgress?) throws {
        let metadata = item.metadata
        try stage(id: metadata.id, kind: metadata.kind, compartment: metadata.compartment, name: metadata.name,
                  created: metadata.created, expires: metadata.expires, replaces: metadata, sealingKey: key) { file, key in
            (try item.reseal(under: key, to: file, progress: progress), metadata.size, metadata.sha256)
        }
    }

    /// Stages the vault's marker file, replaced by `bytes` (sealed under a new vault key).
    func stageMarker(_ bytes: [UInt8]) throws {
        let name = "marker"
        let file = try FileDescriptor.createExclusive(Path.join(directory, name), mode: 0o600)
        try file.write(bytes)
        try file.close()
        try add(.move(staged: "\(Path.lastComponent(of: directory))/\(name)", to: Vault.markerName))
    }

    /// Makes the key store's pending keys `ids` current as the change's first step.
    func stagePromotion(_ ids: [Compartment: [UInt8]]) throws(VaultError) {
        try add(.promoteKeys(ids), first: true)
    }

    private func add(_ operation: Operation, first: Bool = false) throws(VaultError) {
        do { try catalogue.addPending(operation.line, first: first) } catch { throw VaultError.wrap(error) }
    }

    /// Stages one item. `writeContent` writes the vault file (nonce ‖ ciphertext ‖ tag under
    /// the compartment's key) and returns its tag. A small new one (a restore of notes) is
    /// sealed and checked in memory, and its file made on a writer thread (`writeBeside`).
    private func stage(_ item: Description, replaces: ItemMetadata?,
                       writeContent: (ByteSink, SecureBytes) throws -> [UInt8]) throws -> ItemMetadata {
        if replaces == nil, item.size <= Self.writtenBesideLimit {
            try ItemMetadata.checkName(item.name)
            let key = vault.keyStore.key(for: item.compartment)
            let sealed = SealedContent(capacity: Int(item.size) + AEADAlgorithm.standardNonceLength + AEADAlgorithm.tagLength)
            let tag = try writeContent(sealed, key)
            let metadata = ItemMetadata(id: item.id, kind: item.kind, compartment: item.compartment, name: item.name,
                                        created: item.created, expires: item.expires, size: item.size,
                                        contentTag: tag.hex, sha256: item.sha256)
            try writeBeside(sealed, of: metadata, key: key)
            return metadata
        }
        return try stage(id: item.id, kind: item.kind, compartment: item.compartment, name: item.name, created: item.created,
                         expires: item.expires, replaces: replaces,
                         aroundPageCache: item.size >= DirectFileWriter.worthFrom) { file, key in
            (try writeContent(file, key), item.size, item.sha256)
        }
    }

    /// Stages one item whose size and digest are known only once written (`vault add`),
    /// sealed under the compartment's current key unless `sealingKey` says otherwise. A new
    /// item's row may be held back (`holdBack`): no one looks it up before the commit but
    /// the duplicate check, which calls `waitForWrites` first. With `aroundPageCache` the
    /// content file is written around the page cache (`DirectFileWriter`): a restore's large
    /// items, where it measured 22% faster, and `vault add`'s from
    /// `addedAroundPageCacheFrom`; a key rotation was not measured.
    @discardableResult
    func stage(id: String, kind: ItemKind, compartment: Compartment, name: String, created: Date, expires: Date?,
               replaces: ItemMetadata?, sealingKey: SecureBytes? = nil, aroundPageCache: Bool = false,
               write: (ByteSink, SecureBytes) throws -> (tag: [UInt8], size: Int64, sha256: String)) throws -> ItemMetadata {
        try ItemMetadata.checkName(name)
        let item = (id: id, kind: kind, compartment: compartment, name: name, created: created, expires: expires)
        let key = sealingKey ?? vault.keyStore.key(for: item.compartment)
        let finalPath = kind.relativePath(id: id)
        let (content, contentPath, stagedName) = try createContentFile(for: finalPath, replacing: replaces != nil)
        let written: (tag: [UInt8], size: Int64, sha256: String)
        // A large file is written around the page cache, its last writes and its closing on
        // the buffers' thread while the next item goes on (`DirectFileWriter`); the commit
        // and every read of the change's files wait for them (`waitForWrites`).
        do {
            if aroundPageCache {
                written = try DirectFileWriter.writing(to: content, through: directBuffers(), then: { try $0.close() }) { try write($0, key) }
            } else {
                written = try write(content, key)
            }
        } catch {
            // What was written of an item that failed its checks goes at once (a salvage
            // carries on with the next item; nothing of this one may stay, even out of sight).
            try? content.close()
            try? FileSystem.removeFile(contentPath)
            if stagedName == nil { createdFiles.remove(contentPath) }
            throw error
        }
        // No fsync per file: `commitPoint` makes every written file durable with one syncfs.
        // A large one starts going to disk now, while the next items are written.
        if !aroundPageCache {
            if written.size >= FileDescriptor.writebackAtOnceFrom { content.startWritebackOfAll() }
            try content.close()
        }
        let metadata = ItemMetadata(id: item.id, kind: item.kind, compartment: item.compartment, name: item.name,
                                    created: item.created, expires: item.expires, size: written.size,
                                    contentTag: written.tag.hex, sha256: written.sha256)
        // The row makes the item exist (or replaces its record); a move puts staged content
        // in place. Only a replaced item of the other kind leaves a file at another path,
        // removed after the moves. No step removes a path a move writes to, so running the
        // steps again after they all ran changes nothing.
        // A new item's row waits to go in in ID order (`newRows`); a replacement's goes in now.
        let record = try metadata.sealed(by: recordSealer(for: item.compartment, key: key))
        if replaces == nil {
            try holdBack(NewRow(id: item.id, record: record))
        } else {
            try putHeldBackRows()
            try catalogue.put(id: item.id, record: record)
        }
        if let stagedName { try add(.move(staged: stagedName, to: finalPath)) }
        if let old = replaces, old.relativePath != metadata.relativePath {
            try add(.remove(old.relativePath))
        }
        return metadata
    }

    /// Records sealed through one cipher context per compartment (`AEADSealer`), not one a
    /// record; used on the staging caller's thread only. Each is kept with the key it was
    /// made from and made again when the item's content is sealed under another key object
    /// (the key store can be read again mid-change: `Vault.refreshCompartmentKeys`), so an
    /// item's record and content are always under the same key.
    private var recordSealers: [Compartment: (key: SecureBytes, sealer: AEADSealer)] = [:]

    /// `vault add` writes an item of this size or more (known beforehand) around the page
    /// cache: a 5 GiB photo took half the time or less (6.6–9.7 s against 12.4–24.6 s), 96
    /// photos of 8 MiB the same, 256 of 2 MiB 11–15% more (BENCHMARKS.md, stop 66's section
    /// "Large files read around the page cache when they are not in it").
    static let addedAroundPageCacheFrom: Int64 = 4 << 20

    /// Large items' content files are written around the page cache through these
    /// (`DirectFileWriter`), kept for the whole change once the first needs them.
    private var directWriteBuffers: DirectWriteBuffers?

    private func directBuffers() -> DirectWriteBuffers {
        if let directWriteBuffers { return directWriteBuffers }
        let made = DirectWriteBuffers(holdsPlaintext: false)
        directWriteBuffers = made
        return made
    }

    private func recordSealer(for compartment: Compartment, key: SecureBytes) throws -> AEADSealer {
        if let cached = recordSealers[compartment], cached.key === key { return cached.sealer }
        let sealer = try AEADSealer(ItemMetadata.algorithm, key: key)
        recordSealers[compartment] = (key, sealer)
        return sealer
    }

    /// The largest plaintext sealed in memory and handed to a writer thread (`writeBeside`:
    /// `stageNew`, and a restore's new items): while the caller waits for room, six batches
    /// of 64 such files are held (the batch being written, four waiting, the one filling):
    /// about 6 MiB.
    static let writtenBesideLimit: Int64 = 16 << 10

    /// Stages a new item (`vault add`) whose plaintext is small (at most `writtenBesideLimit`:
    /// a note read whole): sealed in memory here and its row held back (`newRows`), its file
    /// created and written on the staging's writer thread while the caller reads and seals
    /// the next items (issue 34). The file is there once `waitForWrites()` or the commit has
    /// returned; an error in writing it comes back from a later `stageNew` (one that hands
    /// that writer a batch), `waitForWrites` or the commit.
    func stageNew(id: String, kind: ItemKind, compartment: Compartment, name: String, created: Date, expires: Date?,
                  sealing plaintext: ByteSource, sizeHint: Int64?) throws -> ItemMetadata {
        precondition(!finished, "an item staged after the change was committed or thrown away")
        try ItemMetadata.checkName(name)
        let key = vault.keyStore.key(for: compartment)
        let sealed = SealedContent(capacity: Int(sizeHint ?? 0) + AEADAlgorithm.standardNonceLength + AEADAlgorithm.tagLength)
        let written = try SealedVaultItem.sealNew(plaintext, key: key, to: sealed, sizeHint: sizeHint)
        let metadata = ItemMetadata(id: id, kind: kind, compartment: compartment, name: name, created: created,
                                    expires: expires, size: written.size, contentTag: written.tag.hex, sha256: written.sha256)
        try writeBeside(sealed, of: metadata, key: key)
        return metadata
    }

    /// The rest of staging a new item sealed in memory: its row held back, its file created
    /// and written by a writer thread while the caller reads and seals the next items.
    private func writeBeside(_ sealed: SealedContent, of metadata: ItemMetadata, key: SecureBytes) throws {
        // Before the first file is made outside the staging directory, as `stage` does.
        try markForSweep()
        fileSystem.startWriteback()
        try holdBack(NewRow(id: metadata.id, record: try metadata.sealed(by: recordSealer(for: metadata.compartment, key: key))))
        let finalPath = metadata.relativePath, places = places, displaced = displaced
        let write: SerialWorker.Job = {
            let (file, _, stagedName) = try places.createContentFile(for: finalPath, replacing: false)
            do {
                try file.write(sealed.bytes)
                try file.close()
            } catch {
                try? file.close()
                throw error
            }
            if let stagedName { displaced.append(staged: stagedName, target: finalPath) }
        }
        try contentWriters.submit(write)
    }

    /// How many held-back rows are sorted in memory before a run is spooled: a change of no
    /// more new items than this holds its rows back at no cost but one sort.
    static let heldBackRunLength = 8192

    /// Puts a new item's row now while the catalogue would still fit its cache (random pages
    /// then cost nothing: a restore of 100,000 notes was 5% slower with every row held back
    /// and spooled), and holds it back (`newRows`) once it would not, unless every row so far
    /// came in ascending ID order: those go in in one pass over the tree as they come, and
    /// holding them back only cost memory (a restore of 3,000,000 notes: a run of rows and
    /// the merge's buffers, about 9 MiB more than at 100,000).
    private func holdBack(_ row: NewRow) throws {
        if newRowOrder.ascending {
            newRowOrder = (row.id, newRowOrder.last.utf8.lexicographicallyPrecedes(row.id.utf8))
        }
        if newRows == nil {
            if catalogueBytes == nil { catalogueBytes = try catalogue.byteCount() }
            // A row takes its ID, its record and a few bytes of B-tree cell (3,000,000 notes
            // added at random: 397 bytes a row, their records 350).
            catalogueBytes? += Int64(row.id.utf8.count + row.record.count + 10)
            if let catalogueBytes, catalogueBytes < vault.rowsGoStraightInBelow || newRowOrder.ascending {
                return try catalogue.put(id: row.id, record: row.record)
            }
            newRows = NewRow.sorter(spoolingIn: directory)
        }
        try newRows?.add(row)
    }

    /// Waits until the files `writeBeside` handed to the writer thread are written (before one
    /// is read back, and before the commit), stages the moves of any it wrote in the staging
    /// directory, and puts the rows it held back into the catalogue. Throws the first error
    /// in writing them.
    func waitForWrites() throws {
        try directWriteBuffers?.waitForWrites()
        try contentWriters.waitUntilDone()
        for (staged, target) in displaced.takeAll() { try add(.move(staged: staged, to: target)) }
        try putHeldBackRows()
    }

    /// Puts the rows `holdBack` held back into the catalogue, in ID order.
    private func putHeldBackRows() throws {
        guard var rows = newRows else { return }
        newRows = nil
        try rows.forEachSorted { row in try catalogue.put(id: row.id, record: row.record) }
    }

    /// Creates the file an item's content is written to (see `ContentPlaces`).
    private func createContentFile(for finalPath: String, replacing: Bool) throws
        -> (file: FileDescriptor, path: String, stagedName: String?) {
        if !replacing { try markForSweep() }
        // Items of under 1 MiB start no writeback of their own (`startWritebackOfAll`).
        fileSystem.startWriteback()
        return try places.createContentFile(for: finalPath, replacing: replacing)
    }

    /// Makes the staging directory durable before the first content file is written outside
    /// it: after a crash, its presence is what tells the next writer to sweep.
    private func markForSweep() throws {
        guard !markedForSweep else { return }
        try Directory.sync(vault.path)
        markedForSweep = true
    }

    /// Stages the removal of an item: its row (it stops existing), then its content file.
    public func stageRemoval(_ item: ItemMetadata) throws(VaultError) {
        do {
            try putHeldBackRows()
            try catalogue.delete(id: item.id)
        } catch { throw VaultError.wrap(error) }
        try add(.remove(item.relativePath))
    }

    /// Stages the removal of an item whose record does not open: its row and whichever
    /// content file it has.
    func stageRemoval(damagedID id: String) throws(VaultError) {
        do {
            try putHeldBackRows()
            try catalogue.delete(id: id)
        } catch { throw VaultError.wrap(error) }
        for kind in [ItemKind.photo, .note] { try add(.remove(kind.relativePath(id: id))) }
    }

    /// A restored item replaces one whose record was damaged: after the moves, remove that
    /// ID's content file of the other kind, if any (never a path a move writes).
    public func stageRepair(ofDamagedID id: String, restoredKind kind: ItemKind) throws(VaultError) {
        let other: ItemKind = kind == .photo ? .note : .photo
        try add(.remove(other.relativePath(id: id)))
    }

    /// Makes every staged change visible: the commit point, then the file steps, then cleanup.
    /// With `committing`, what the change is to a person ("the restore"): once it commits, a
    /// Ctrl-C lets the run finish instead of ending it (`Interruption.committed`).
    public func commit(committing what: String? = nil) throws(VaultError) {
        precondition(!finished)
        // Every file written before the syncfs that makes them durable; the thread ends here.
        do {
            try waitForWrites()
            try contentWriters.finish()
        } catch {
            discard()
            throw VaultError.wrap(error)
        }
        // Ctrl-C waits for the commit and its steps: a commit is never cut in half by us
        // (a SIGKILL can cut it; the next writer then finishes it from the pending rows).
        try Interruption.critical { () throws(VaultError) in
            do { try commitPoint() } catch {
                // A COMMIT that failed in its WAL sync may still be on disk and count as
                // committed when the file is next opened: the files written in place stay,
                // and so does the staging directory, so the next writer's sweep keeps exactly
                // those that committed rows reference.
                abandonToSweep()
                throw VaultError.wrap(error)
            }
            finished = true
            if let interruptCleanup { Interruption.cancel(interruptCleanup) }
            if let what { Interruption.committed(what) }
            // The commit point has passed: from here a failure (or a crash) is finished by the
            // next process that opens the vault for writing, and the user must know not to retry.
            do { try Self.carryOutPending(of: catalogue, in: vault.path, keyStore: vault.keyStore) }
            catch { throw VaultError.commitPending(vault: vault.path, cause: VaultError.wrap(error).description) }
            Directory.removePrivateTree(directory)
        }
        vault.forgetCachedItems()
    }

    /// The commit point: the catalogue transaction, committed once the staged files are
    /// durable (one syncfs for all of them: their data, their inodes and the staging directory).
    func commitPoint() throws {
        try fileSystem.sync()
        try catalogue.commitChange()
    }

    /// Commits and stops, as a process killed right after the commit point would (for tests
    /// of recovery).
    func commitAndAbandon() throws {
        try waitForWrites()
        try commitPoint()
        finished = true
        if let interruptCleanup { Interruption.cancel(interruptCleanup) }
    }

    /// Stops without cleaning up, as a killed process would (for tests of recovery); the
    /// transaction goes with the connection, as it would with the process.
    func abandon() {
        finished = true
        directWriteBuffers?.abandonWrites()
        contentWriters.cancel()
        fileSystem.stopWriteback()
        catalogue.rollbackChange()
        if let interruptCleanup { Interruption.cancel(interruptCleanup) }
    }

    /// Throws everything staged away; the vault is as it was.
    public func discard() {
        finished = true
        // The writer threads stop before their files are removed: none is made after.
        directWriteBuffers?.abandonWrites()
        contentWriters.cancel()
        fileSystem.stopWriteback(waiting: false)
        catalogue.rollbackChange()
        // New items' files first, their removal durable: the staging directory goes last,
        // as it marks that a sweep is needed if this is cut short (or the power fails).
        Interruption.critical { createdFiles.removeAll() }
        if markedForSweep {
            for kind in ItemKind.allCases { try? Directory.sync(Path.join(vault.path, kind.directory)) }
        }
        if let interruptCleanup { Interruption.cancel(interruptCleanup) }
        Directory.removePrivateTree(directory)
    }

    /// After a failed commit point: the transaction is rolled back here, but what was written
    /// is left for the next writer's sweep to judge against the rows that did commit.
    private func abandonToSweep() {
        finished = true
        directWriteBuffers?.abandonWrites()
        contentWriters.cancel()
        fileSystem.stopWriteback(waiting: false)
        catalogue.rollbackChange()
        if let interruptCleanup { Interruption.cancel(interruptCleanup) }
    }

    /// Carries out the pending steps of a committed change, syncs what they touched, and
    /// clears them.
    static func carryOutPending(of catalogue: VaultCatalogue, in vaultPath: String, keyStore: KeyStore) throws {
        let lines = try catalogue.pendingOperations()
        guard !lines.isEmpty else { return }
        let operations = lines.compactMap { Operation(line: Substring($0)) }
        // Rows are written by this code; one that does not read is damage, not ours to guess at.
        guard operations.count == lines.count else {
            throw VaultError.catalogueDamaged(path: catalogue.path, reason: "it holds a pending step this version cannot read")
        }
        try apply(operations, in: vaultPath, keyStore: keyStore)
        try catalogue.clearPending()
    }

    /// Applies journal steps; each can run again after a crash with the same result. Every
    /// step goes through directory handles opened without following links (the vault's own
    /// directory as the user named it), with renameat2 and unlinkat: a link planted in place
    /// of `Photos/` or a staging directory is refused, never written or removed through.
    static func apply(_ operations: [Operation], in vaultPath: String, keyStore: KeyStore) throws {
        let places = try StepPlaces(vaultPath: vaultPath)
        for operation in operations {
            switch operation {
            case let .promoteKeys(ids):
                try keyStore.promote(ids)
            case let .move(from, to):
                // A staging directory that is gone was moved out of and removed: done.
                guard let (source, name) = try places.directory(of: from, missingIsDone: true) else { continue }
                guard let (target, newName) = try places.directory(of: to, missingIsDone: false) else { continue }
                do { try DirectoryHandle.rename(name, in: source, to: newName, in: target, .replace) }
                catch let error as SystemError where error.errno == ENOENT { continue }
                catch let error as SystemError {
                    throw SystemError("cannot move a staged item into place", path: Path.join(vaultPath, to), errno: error.errno)
                }
                places.touched(target)
            case let .remove(path):
                guard let (directory, name) = try places.directory(of: path, missingIsDone: true) else { continue }
                do { try directory.removeFile(name) } catch let error as SystemError where error.errno == ENOENT { continue }
                places.touched(directory)
            case .finishMigration:
                try MetaDirectory.finishMigration(vaultPath: vaultPath)
                places.touched(places.vault)
            }
        }
        try places.syncTouched()
    }

    /// What killed writers left in a vault with a catalogue, under the vault lock: a committed
    /// change's pending steps are carried out; then, if a dead writer's staging directory is
    /// there, new items' files that no row references are swept, and the staging directories
    /// are thrown away (what they still hold was never committed). Only real directories of this user count:
    /// a link or another user's directory with a staging name is left alone.
    static func recover(in vault: Vault) throws {
        guard let catalogue = vault.catalogue else { preconditionFailure("a writer's vault has its catalogue") }
        try carryOutPending(of: catalogue, in: vault.path, keyStore: vault.keyStore)
        let vaultDirectory = try DirectoryHandle.open(vault.path, followingLink: true)
        let dead = try vaultDirectory.entries(where: { $0.hasPrefix(prefix) }).filter { name in
            guard let staging = try? vaultDirectory.openSubdirectory(name) else { return false }
            return (try? staging.status())?.isOwnedByCurrentUser == true
        }
        guard !dead.isEmpty else { return }
        // The sweep comes before the staging directories go, so a crash during it sweeps again.
        try catalogue.reading {
            try sweepUnreferencedContent(in: vaultDirectory) { id in try catalogue.contains(id: id) }
        }
        for name in dead { vaultDirectory.removePrivateTree(name) }
    }

    /// Deletes the content files of new items whose change never committed: files in
    /// Photos/ and Notes/ named by a canonical (upper-case) item ID that has no row. Names of
    /// any other shape are not ours and stay; unlinking a name never follows a link.
    /// `isReferenced` asks the catalogue about one ID, so that neither the folder's names nor
    /// the catalogue's IDs are held whole (issue 34).
    static func sweepUnreferencedContent(in vaultDirectory: DirectoryHandle, isReferenced: (String) throws -> Bool) throws {
        for kind in ItemKind.allCases {
            guard let folder = try? vaultDirectory.openSubdirectory(kind.directory) else { continue }
            let suffix = "." + kind.fileExtension
            var unreferenced: [String] = []
            try folder.forEachEntry { name in
                guard name.hasSuffix(suffix) else { return }
                let id = String(name.dropLast(suffix.count))
                if EntryName.isCanonicalID(id), try !isReferenced(id) { unreferenced.append(name) }
            }
            for name in unreferenced { try folder.removeFile(name) }
            if !unreferenced.isEmpty { try folder.sync() }
        }
    }

    /// What killed v1 writers left (before the migration to a catalogue): a committed journal
    /// is replayed, anything else thrown away. Called with the vault lock held. Returns how
    /// many commits were completed. Only real directories of this user count: a link or
    /// another user's directory with a staging name is left alone, never read as a journal
    /// and never deleted through.
    @discardableResult
    static func recoverVersion1(in vaultPath: String, keyStore: KeyStore) throws -> Int {
        var replayed = 0
        let vaultDirectory = try DirectoryHandle.open(vaultPath, followingLink: true)
        for name in try vaultDirectory.entries(where: { $0.hasPrefix(prefix) }) {
            guard let staging = try? vaultDirectory.openSubdirectory(name), (try? staging.status())?.isOwnedByCurrentUser == true else { continue }
            if let journal = try? staging.openFileForReading(journalName), let status = try? journal.status(),
               status.kind == .regular, status.isOwnedByCurrentUser,
               let bytes = try? journal.readAll(limit: 256 << 20) {
                let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
                let operations = lines.compactMap(Operation.init(line:))
                // A journal is written atomically, so a partial one cannot exist; a malformed
                // one is not ours to act on. It is a committed change all the same: the vault
                // is not migrated (which would delete the staging directory with it) but
                // refused, and the journal left for a person to look at.
                guard operations.count == lines.count else {
                    throw VaultError.catalogueDamaged(path: Path.join(Path.join(vaultPath, name), journalName),
                                                      reason: "a committed change's journal holds a step this version does not accept")
                }
                try apply(operations, in: vaultPath, keyStore: keyStore)
                replayed += 1
            }
            vaultDirectory.removePrivateTree(name)
        }
        return replayed
    }
}

/// The directories pending steps act in, each opened once without following a link: the
/// vault's item folders, `Meta/`, and staging directories of this user.
private final class StepPlaces {
    let vault: DirectoryHandle
    private var opened: [String: DirectoryHandle] = [:]
    private var touchedNames: [String: DirectoryHandle] = [:]

    init(vaultPath: String) throws {
        vault = try DirectoryHandle.open(vaultPath, followingLink: true)
    }

    /// The open directory holding the step path `path` (one already checked by `Operation`)
    /// and the name in it; nil if that directory is missing and `missingIsDone`.
    func directory(of path: String, missingIsDone: Bool) throws -> (DirectoryHandle, String)? {
        let parts = path.split(separator: "/").map(String.init)
        guard parts.count == 2 else { return (vault, path) }
        if let handle = opened[parts[0]] { return (handle, parts[1]) }
        let handle: DirectoryHandle
        do { handle = try vault.openSubdirectory(parts[0]) }
        catch let error as SystemError where missingIsDone && error.errno == ENOENT { return nil }
        // A staging directory is ours only if we made it: another user's is never moved out of.
        if parts[0].hasPrefix(VaultStaging.prefix) { try handle.requireOwnedByUser() }
        opened[parts[0]] = handle
        return (handle, parts[1])
    }

    func touched(_ directory: DirectoryHandle) { touchedNames[directory.path] = directory }

    /// fsync on every directory a step changed, so the steps survive a power cut.
    func syncTouched() throws {
        for path in touchedNames.keys.sorted() { try touchedNames[path]?.sync() }
    }
}

/// Where a change creates content files, for the thread that creates them: `stage` creates
/// them on the caller's thread, `writeBeside` on the writer thread.
private struct ContentPlaces: @unchecked Sendable {
    let vaultPath: String
    let stagingDirectory: String
    let createdFiles: CreatedFiles

    /// Creates the file an item's content is written to: its final path if nothing is there
    /// (a new ID), else a file in the staging directory (`stagedName`, relative to the
    /// vault) that a pending move puts in place. A leftover at a new ID's final path (only a
    /// crash the sweep has not seen yet could leave one) is never reused: it is staged over.
    /// For a new ID the staging directory must already be durable (`markForSweep`).
    func createContentFile(for finalPath: String, replacing: Bool) throws
        -> (file: FileDescriptor, path: String, stagedName: String?) {
        if !replacing {
            let path = Path.join(vaultPath, finalPath)
            // Created and recorded in one section that Ctrl-C's cleanup waits for: it either
            // sees the file or runs before it exists (and then this never returns: the process
            // ends). Such sections run beside the caller's thread's own (`alongside`).
            let file: FileDescriptor? = try Interruption.alongside {
                let file: FileDescriptor
                do { file = try FileDescriptor.createExclusive(path, mode: 0o600) } catch {
                    guard (error as? SystemError)?.errno == EEXIST else { throw error }
                    return nil
                }
                // Listed even if the list cannot be written: the discard still removes it.
                do { try createdFiles.append(path) } catch { try? file.close(); throw error }
                return file
            }
            if let file { return (file, path, nil) }
        }
        let name = "\(Path.lastComponent(of: finalPath)).content"
        let path = Path.join(stagingDirectory, name)
        // Also in a section the cleanup waits for: a file made while it removes the staging
        // tree would keep the directory from going.
        let file = try Interruption.alongside { try FileDescriptor.createExclusive(path, mode: 0o600) }
        return (file, path, "\(Path.lastComponent(of: stagingDirectory))/\(name)")
    }
}

/// A new item's catalogue row held back (`VaultStaging.holdBack`): its ID and sealed record.
private struct NewRow {
    let id: String
    let record: [UInt8]

    /// Runs of 8,192 rows (about 4 MiB of records) sorted in memory: 1,000,000 rows are
    /// 123 runs, merged in one pass (`ExternalSorter`).
    static func sorter(spoolingIn directory: String) -> ExternalSorter<NewRow> {
        ExternalSorter(runLength: VaultStaging.heldBackRunLength, directory: directory, encode: encoded, decode: decoded, key: orderKey,
                       by: { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) })
    }

    /// The ID and the record, each after its length.
    static func encoded(_ row: NewRow) -> [UInt8] {
        var writer = BinaryWriter(capacity: 48 + row.record.count)
        writer.integer(row.id.utf8.count)
        writer.append(Array(row.id.utf8))
        writer.integer(row.record.count)
        writer.append(row.record)
        return writer.bytes
    }

    static func decoded(_ bytes: [UInt8]) throws -> NewRow {
        var reader = BinaryReader(bytes, what: "a spooled catalogue row")
        let id = String(decoding: try reader.bytes(try reader.int(atMost: 64, "ID length")), as: UTF8.self)
        return NewRow(id: id, record: try reader.bytes(try reader.int(atMost: bytes.count, "record length")))
    }

    /// The ID's first 16 hex digits as a number: the catalogue's order (bytes, upper-case
    /// hex) for all but rows that share them, which the ID itself then orders.
    static func orderKey(_ row: NewRow) -> UInt64 {
        var key: UInt64 = 0, digits = 0
        for byte in row.id.utf8 where digits < 16 {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0")
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = byte - UInt8(ascii: "A") + 10
            default: continue
            }
            key = key << 4 | UInt64(value)
            digits += 1
        }
        return key
    }
}

/// Files the writer thread wrote in the staging directory, with where they go.
private final class Displaced: Sendable {
    private let moves = Mutex<[(staged: String, target: String)]>([])

    func append(staged: String, target: String) { moves.withLock { $0.append((staged, target)) } }

    func takeAll() -> [(staged: String, target: String)] {
        moves.withLock { moves in
            defer { moves.removeAll() }
            return moves
        }
    }
}

/// A new item's sealed content, held until a writer thread writes it (ciphertext only).
private final class SealedContent: ByteSink, @unchecked Sendable {
    private(set) var bytes: [UInt8] = []
    /// Room for the nonce, the plaintext and the tag: growing by doubling would hold up to
    /// twice that while it waits for the writer.
    init(capacity: Int) { bytes.reserveCapacity(capacity) }
    func write(_ slice: ArraySlice<UInt8>) throws { bytes.append(contentsOf: slice) }
}

/// The paths of files a change created at their final places, removed if it does not commit.
/// Appended to within `Interruption.alongside` sections, which the Ctrl-C cleanup waits for. A change of
/// millions of items must not hold a path per item (issue 34): past `batch` paths, they are
/// appended to a list in the change's own staging directory (NUL-separated: a vault's path
/// may hold any other byte), read back only to remove them. The list is no journal: a crash
/// leaves the staging directory, and the next writer's sweep finds such files by their IDs.
private final class CreatedFiles: @unchecked Sendable {
    static let batch = 4096
    /// Appended to from the writer thread and the caller's; the cleanup reads after they stopped.
    private let guarded = NSLock()
    private var recent: Set<String> = []
    private let spillPath: String
    private var spill: FileDescriptor?

    init(spillingTo path: String) { spillPath = path }

    func append(_ path: String) throws {
        try guarded.withLock {
            recent.insert(path)
            if recent.count >= Self.batch { try spillRecent() }
        }
    }

    /// Forgets a file already removed (one that failed its checks). One already spilled stays
    /// listed: removing it again finds nothing, and no later item of the change has its ID.
    func remove(_ path: String) { Interruption.critical { _ = guarded.withLock { recent.remove(path) } } }

    private func spillRecent() throws {
        if spill == nil { spill = try FileDescriptor.createExclusive(spillPath, mode: 0o600) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(recent.count * 96)
        for path in recent { bytes += path.utf8; bytes.append(0) }
        try spill?.write(bytes)
        recent.removeAll(keepingCapacity: true)
    }

    func removeAll() {
        guarded.lock()
        defer { guarded.unlock() }
        for path in recent { try? FileSystem.removeFile(path) }
        recent.removeAll()
        guard let spill = spill else { return }
        self.spill = nil
        try? spill.close()
        guard let list = try? FileDescriptor.openForReading(spillPath) else { return }
        defer { try? list.close() }
        var buffer = [UInt8](repeating: 0, count: 1 << 20), pending: [UInt8] = []
        while let n = try? list.read(into: &buffer, count: buffer.count), n > 0 {
            pending += buffer[0..<n]
            var start = 0
            while let end = pending[start...].firstIndex(of: 0) {
                try? FileSystem.removeFile(String(decoding: pending[start..<end], as: UTF8.self))
                start = end + 1
            }
            pending.removeFirst(start)
        }
    }
}

/// Passes a source through while copying it into a file.
private final class CopyingSource: ByteSource {
    private let source: ByteSource
    private let file: ByteSink

    init(_ source: ByteSource, to file: ByteSink) {
        self.source = source
        self.file = file
    }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        let n = try source.read(into: &buffer, offset: offset, count: count)
        if n > 0 { try file.write(buffer[offset..<(offset + n)]) }
        return n
    }
}
