import Foundation
import N11Crypto
import N11Format
import N11System

/// A vault directory (seed 003 layout):
///
///     .n11vault              marker: vault ID and a check sealed under the vault key
///     Photos/{UUID}.n11      12-byte nonce ‖ ChaCha20-Poly1305 ciphertext ‖ 16-byte tag
///     Notes/{UUID}.n11note   the same, for UTF-8 notes
///     Catalogue.sqlite       one row per item: its metadata, sealed under its compartment's
///                            key (`VaultCatalogue`; v1 vaults kept Meta/{UUID}.n11meta files)
///     .lock                  held while a process changes the vault
///
/// An item exists once its row has committed. A new item's content file is written at its
/// place before that commit; a replacement's is written out of sight and moved into place
/// by the committed change's pending steps (`VaultStaging`, which also says how a killed
/// change is finished or swept away by the next writer).
public final class Vault: @unchecked Sendable {
    public let path: String
    public let keyStore: KeyStore
    private var lock: FileLock?
    /// What opening for writing created, decided under the lock: only this may be taken back.
    private var created = (directory: false, layout: false)
    private var cachedItems: [ItemMetadata]?
    private var cachedDamaged: [String] = []
    /// The item records; nil for a v1 vault opened to read (its records are still files).
    private(set) var catalogue: VaultCatalogue?
    /// Content files a committed change has not moved into place yet: final relative path →
    /// where the file is now. Read with the items, so both are one state of the vault.
    private var pendingMoves: [String: String] = [:]
    /// How large the catalogue may grow in a change before its new rows are held back and put
    /// in ID order at the end, unless they come in that order (`VaultStaging`); lowered by
    /// tests to take that path with few items.
    var rowsGoStraightInBelow = Int64(VaultCatalogue.changeCacheBytes)
    /// How many items an add that knows its count must have for its IDs to ascend
    /// (`AscendingItemIDs`): more than one run of held-back rows, which costs nothing to sort
    /// (`VaultStaging.heldBackRunLength`). Below it IDs stay random, so that a night of a few
    /// hundred new items touches no more manifest pages than before (DESIGN.md §8.6); lowered
    /// by tests.
    var ascendingIDsAbove = VaultStaging.heldBackRunLength
    /// The opening keys `lookUp` uses, made once; and whether it read the key store again.
    private var lookupKeys: [(Compartment, SecureBytes, [UInt8])]?
    private var refreshedForLookup = false
    /// Whether `lookUp` has read the pending moves. Not `lookupKeys`: that is made only once a
    /// lookup finds a record, and a restore into an empty vault, which finds none, read the
    /// moves again (a statement prepared and run) twice an item (issue 29).
    private var lookupReadMoves = false
    /// A version 1 vault read without the lock: its items by ID, for `lookUp`.
    private var lookupIndex: [String: ItemMetadata]?

    static let markerName = ".n11vault"
    static let markerMagic = Array("N11VAULT".utf8)
    static let markerCheck = Array("n11archive vault key check".utf8)
    /// Notes are text: read whole into memory, so they are bounded.
    public static let maximumNoteSize = 16 << 20

    private init(path: String, keyStore: KeyStore) {
        self.path = path
        self.keyStore = keyStore
    }

    // MARK: opening

    /// Opens the vault at `path`. With `forWriting`, the vault lock is taken (waiting up to
    /// `lockWait` seconds), leftovers of interrupted runs are cleaned, and a missing or empty
    /// directory becomes a new vault.
    ///
    /// `claim` receives the vault in the same critical section (`Interruption.critical`) that
    /// creates and finishes it, so a Ctrl-C finds it either not made yet or in the caller's
    /// hands (a restore into a new home takes it back then).
    public static func open(at path: String, keyStore: KeyStore, forWriting: Bool,
                            lockWait: Double = 0, claim: ((Vault) -> Void)? = nil) throws(VaultError) -> Vault {
        let vault = Vault(path: Path.absolute(path), keyStore: keyStore)
        do {
            let status = try FileStatus.of(vault.path, followLinks: true)
            if let status, status.kind != .directory { throw VaultError.notAVault(path: vault.path) }
            // Reading a vault that is not there is a missing input, not a wrong directory.
            if status == nil && !forWriting { throw VaultError.vaultMissing(path: vault.path) }
            // Before anything is created in it (even the lock) or read from it.
            if let status { try Self.checkOnlyUserCanChange(vault.path, directory: status) }
            // Decide before creating anything (even the lock file) in a directory that is not ours.
            if status != nil, !(try vault.isNewOrUnfinished()), ((try? FileStatus.of(vault.markerPath)) ?? nil) == nil {
                throw VaultError.notAVault(path: vault.path)
            }
            if forWriting {
                // Lock first, then decide whether to create the layout: two processes starting
                // the same new vault must not both try to write its marker.
                // A writer works on the vault by path (lock, catalogue, steps): nobody else may
                // be able to swap it, or a directory above it, meanwhile (as for the key store).
                if status == nil {
                    try PrivatePermissions.checkAncestors(ofNew: vault.path, what: "your vault")
                    vault.created.directory = try Directory.ensure(vault.path, mode: 0o700)
                    // Someone else's directory may have appeared since the stat above.
                    if !vault.created.directory, let now = try FileStatus.of(vault.path, followLinks: true) {
                        try Self.checkOnlyUserCanChange(vault.path, directory: now)
                    }
                } else {
                    try PrivatePermissions.checkAncestors(of: vault.path, what: "your vault")
                }
                try vault.takeLock(wait: lockWait)
            }
        } catch { throw VaultError.wrap(error) }
        try Interruption.critical { () throws(VaultError) in
            do {
                if forWriting, try vault.isNewOrUnfinished() {
                    vault.created.layout = true
                    try vault.createLayout()
                }
                guard ((try? FileStatus.of(vault.markerPath)) ?? nil) != nil else { throw VaultError.notAVault(path: vault.path) }
                try vault.checkMarker()
                if forWriting { try vault.removeLeftovers() } else { try vault.openCatalogueToRead() }
            } catch {
                if vault.lock != nil { vault.removeIfCreated() }
                throw VaultError.wrap(error)
            }
            claim?(vault)
        }
        return vault
    }

    /// Takes back a vault that this open created, for a command that failed (a restore into
    /// a new vault): under the lock, the marker and the empty item directories, and the
    /// directory itself if this open made it. Nothing else is ever removed: a vault that
    /// existed, or one that holds anything, stays. Returns whether the vault is gone (or was
    /// never this process's to remove: false).
    @discardableResult
    public func removeIfCreated() -> Bool {
        precondition(lock != nil, "vault opened read-only")
        guard created.layout else { return false }
        let layout = [ItemKind.photo.directory, ItemKind.note.directory]
        // Anything in an item directory or the catalogue (a commit that got past its commit
        // point, say) keeps the vault. Checked under the lock, so nobody adds to it meanwhile.
        for sub in layout where !((try? Directory.entries(of: Path.join(path, sub), sorted: false)) ?? []).isEmpty { return false }
        // What has committed, through a connection of its own: this may run on the interrupt
        // thread while the main thread's change is open on the vault's connection.
        if catalogue != nil {
            guard let committed = try? VaultCatalogue.open(in: path, forWriting: false), (try? committed.count()) == 0,
                  (try? committed.pendingOperations())?.isEmpty == true else { return false }
        }
        // The marker first: without it the rest is an unfinished layout, which the next open
        // completes; with it but without item directories it would be a broken vault.
        guard (try? FileSystem.removeFile(markerPath)) != nil else { return false }
        created.layout = false
        // Unlinked even if a connection is still open (the main thread's, interrupted): the
        // process is on its way out, and nothing was committed to them.
        VaultCatalogue.removeFiles(in: path)
        AtomicFile.removeLeftovers(in: path)
        // rmdir, never a recursive removal.
        for sub in layout where (try? FileSystem.removeEmptyDirectory(Path.join(path, sub))) == nil { return false }
        guard created.directory else { return true }
        try? FileSystem.removeFile(Path.join(path, ".lock"))
        return (try? FileSystem.removeEmptyDirectory(path, missingIsDone: false)) != nil
    }

    /// Throws unless `path` could be opened for writing as a vault (missing, or an empty
    /// directory or a vault that only the user can change, in a place nobody else can swap):
    /// lets `init` refuse a bad --vault before it asks for anything or creates keys.
    public static func checkCanCreateOrOpen(at path: String) throws(VaultError) {
        let absolute = Path.absolute(path)
        do {
            guard let status = try FileStatus.of(absolute, followLinks: true) else {
                try PrivatePermissions.checkAncestors(ofNew: absolute, what: "your vault")
                return
            }
            guard status.kind == .directory else { throw VaultError.notAVault(path: absolute) }
            try checkOnlyUserCanChange(absolute, directory: status)
            try PrivatePermissions.checkAncestors(of: absolute, what: "your vault")
            let names = try Directory.entries(of: absolute)
            guard names.allSatisfy({ $0 == ".lock" }) || names.contains(markerName) else { throw VaultError.notAVault(path: absolute) }
        } catch { throw VaultError.wrap(error) }
    }

    private var markerPath: String { Path.join(path, Self.markerName) }

    /// A vault is a place only its user may change (DESIGN.md §3.8): another user who owns or
    /// may write its directory, an item directory, the catalogue or the marker could plant
    /// pending steps, content files or links for us to act on (an empty 0777 directory that
    /// someone else made for `init`, say). The vault directory may be reached through a link
    /// the user named (`status` follows it); nothing of the layout inside may be a link.
    private static func checkOnlyUserCanChange(_ path: String, directory status: FileStatus) throws {
        try PrivatePermissions.checkOnlyUserCanChange(path, status: status)
        let layout = [ItemKind.photo.directory, ItemKind.note.directory, MetaDirectory.name, Self.markerName]
            + VaultCatalogue.fileNames
        for name in layout {
            let full = Path.join(path, name)
            guard let status = try FileStatus.of(full) else { continue }
            guard status.kind != .symlink else { throw PrivatePermissions.Violation.notARegularFile(path: full) }
            try PrivatePermissions.checkOnlyUserCanChange(full, status: status)
        }
    }

    /// Empty, or holding only what an interrupted `createLayout` leaves (empty item
    /// directories, the marker's temp file, no marker yet).
    /// (A catalogue without a marker holds no item: items are added only to a vault whose
    /// marker exists. An empty Meta/ is an unfinished v1 layout.)
    private func isNewOrUnfinished() throws -> Bool {
        let directories: Set<String> = [ItemKind.photo.directory, ItemKind.note.directory, MetaDirectory.name]
        let files = Set([".lock"] + VaultCatalogue.fileNames)
        for name in try Directory.entries(of: path) where !name.hasPrefix(AtomicFile.tempPrefix) && !files.contains(name) {
            guard directories.contains(name), (try Directory.entries(of: Path.join(path, name))).isEmpty else { return false }
        }
        return true
    }

    private func createLayout() throws {
        try Directory.ensure(path, mode: 0o700)
        AtomicFile.removeLeftovers(in: path)   // an interrupted earlier attempt's marker or catalogue
        for sub in [ItemKind.photo.directory, ItemKind.note.directory] {
            try Directory.ensure(Path.join(path, sub), mode: 0o700)
        }
        if MetaDirectory.exists(in: path) { try FileSystem.removeEmptyDirectory(MetaDirectory.path(in: path)) }
        VaultCatalogue.removeFiles(in: path)
        try VaultCatalogue.createEmpty(in: path)
        let vaultID = SecureRandom.bytes(16)
        let header = Self.markerMagic + [1] + vaultID
        let nonce = SecureRandom.bytes(AEADAlgorithm.standardNonceLength)
        let box = try AEAD.seal(.chacha20Poly1305, key: keyStore.key(for: .vault), nonce: nonce,
                                plaintext: Self.markerCheck, aad: header)
        try AtomicFile.write(header + nonce + box.ciphertext + box.tag, to: markerPath, replaceExisting: false)
    }

    /// The marker opens only under a vault key of the key store that made the vault (the
    /// current one, or a retired one until a rotation's journal has been applied).
    private func checkMarker() throws {
        let bytes = try FileDescriptor.openForReading(markerPath).readAll(limit: 4096)
        let headerLength = Self.markerMagic.count + 1 + 16
        let n = AEADAlgorithm.standardNonceLength, t = AEADAlgorithm.tagLength
        guard bytes.count == headerLength + n + Self.markerCheck.count + t,
              Array(bytes[0..<Self.markerMagic.count]) == Self.markerMagic else { throw VaultError.notAVault(path: path) }
        func opens() -> Bool {
            keyStore.openingKeys(for: .vault).contains { key in
                (try? AEAD.open(.chacha20Poly1305, key: key, nonce: Array(bytes[headerLength..<(headerLength + n)]),
                                ciphertext: Array(bytes[(headerLength + n)..<(bytes.count - t)]),
                                tag: Array(bytes[(bytes.count - t)...]), aad: Array(bytes[0..<headerLength]))) != nil
            }
        }
        // Not under any key this process has: perhaps another process rotated them since it
        // loaded the key store; read it again once before calling it another store's vault.
        guard opens() || (keyStore.refreshCompartmentKeys() && opens()) else {
            throw VaultError.vaultMismatch(vault: path, keyStore: keyStore.path)
        }
    }

    /// The marker sealed under `key` (a key rotation's new vault key), for the same vault ID.
    func marker(resealedUnder key: SecureBytes) throws -> [UInt8] {
        let bytes = try FileDescriptor.openForReading(markerPath).readAll(limit: 4096)
        let header = Array(bytes[0..<(Self.markerMagic.count + 1 + 16)])
        let nonce = SecureRandom.bytes(AEADAlgorithm.standardNonceLength)
        let box = try AEAD.seal(.chacha20Poly1305, key: key, nonce: nonce, plaintext: Self.markerCheck, aad: header)
        return header + nonce + box.ciphertext + box.tag
    }

    private func takeLock(wait: Double) throws {
        switch try FileLock.acquire(Path.join(path, ".lock"), waitSeconds: wait) {
        case .acquired(let lock): self.lock = lock
        case .heldBy(let pid): throw VaultError.busy(lock: Path.join(path, ".lock"), holder: pid)
        }
    }

    /// What killed writers left, under the lock, before anything looks at the items: a v1
    /// vault's interrupted commits are finished and it is migrated; a committed change's
    /// pending steps are carried out; anything staged but never committed, and temp files,
    /// are thrown away. A content file is removed only by a committed step, or by the sweep
    /// after a killed change (a file named like an item whose ID has no row).
    private func removeLeftovers() throws {
        for sub in [ItemKind.photo.directory, ItemKind.note.directory] {
            AtomicFile.removeLeftovers(in: Path.join(path, sub))
        }
        // A key store write killed half-way (a key rotation's first step) leaves a temp file
        // in the home; only a dead process's go, so this needs no lock of the key store's.
        AtomicFile.removeLeftovers(in: keyStore.home.root)
        let catalogueFile = Path.join(path, VaultCatalogue.fileName)
        if ((try? FileStatus.of(catalogueFile)) ?? nil) == nil {
            guard MetaDirectory.exists(in: path) else { throw VaultError.notAVault(path: path) }
            AtomicFile.removeLeftovers(in: MetaDirectory.path(in: path))
            try VaultStaging.recoverVersion1(in: path, keyStore: keyStore)
            try MetaDirectory.migrate(vaultPath: path)
        }
        AtomicFile.removeLeftovers(in: path)
        let catalogue = try VaultCatalogue.open(in: path, forWriting: true)
        self.catalogue = catalogue
        try VaultStaging.recover(in: self)
    }

    /// A reader's view: the catalogue, or a v1 vault's record files until a writer migrates it.
    private func openCatalogueToRead() throws {
        if ((try? FileStatus.of(Path.join(path, VaultCatalogue.fileName))) ?? nil) != nil {
            catalogue = try VaultCatalogue.open(in: path, forWriting: false)
        } else if !MetaDirectory.exists(in: path) {
            throw VaultError.notAVault(path: path)
        }
    }

    // MARK: reading the catalogue

    /// Every item whose metadata opens with one of this key store's compartment keys,
    /// sorted by creation time. Expired fade items are included only when asked for.
    public func items(includeExpired: Bool = false, now: Date = Date()) throws(VaultError) -> [ItemMetadata] {
        let all = try allItems()
        return includeExpired ? all : all.filter { !$0.isExpired(at: now) }
    }

    private func allItems() throws(VaultError) -> [ItemMetadata] {
        if let cachedItems { return cachedItems }
        var (found, damaged) = try readRecords()
        // A record under a key this process has not seen: another process rotated the keys
        // since this one loaded the key store. Read it again and retry those records.
        if !damaged.isEmpty, let before = try? openingKeyIDs(), keyStore.refreshCompartmentKeys(),
           let after = try? openingKeyIDs(), after != before {
            // Everything again, not just those records: one read transaction is one state of
            // the vault (the rotation may have re-sealed every record meanwhile).
            (found, damaged) = try readRecords()
        }
        damaged.sort()
        found.sort { ($0.created, $0.id) < ($1.created, $1.id) }
        cachedItems = found
        cachedDamaged = damaged
        return found
    }

    /// Opens every record, from the catalogue in one read transaction
    /// with its pending moves, or from a v1 vault's files. Opening (decrypt, decode) is most
    /// of what `vault list` and the start of `create` take on a big vault, so each batch of
    /// records is split over the cores.
    private func readRecords() throws(VaultError) -> (found: [ItemMetadata], damaged: [String]) {
        let keys: [(Compartment, SecureBytes, [UInt8])]
        do { keys = try recordKeys() } catch { throw VaultError.wrap(error) }
        var found: [ItemMetadata] = [], damaged: [String] = []
        func open(_ batch: [(id: String, sealed: [UInt8]?)]) {
            let result = Self.openRecords(batch, keys: keys)
            found += result.found
            damaged += result.damaged
        }
        do {
            if let catalogue {
                let pending = try catalogue.read { batch in open(batch.map { ($0.id, $0.sealed) }) }
                pendingMoves = [:]
                for line in pending {
                    if case let .move(staged, target)? = VaultStaging.Operation(line: Substring(line)) { pendingMoves[target] = staged }
                }
            } else {
                do {
                    let ids = try MetaDirectory.recordIDs(in: path)
                    for start in stride(from: 0, to: ids.count, by: 4096) {
                        open(ids[start..<min(ids.count, start + 4096)].map { ($0, MetaDirectory.record(id: $0, in: path)) })
                    }
                } catch {
                    guard try migratedMeanwhile() else { throw error }
                }
                // A writer may have migrated the vault while this reader read Meta/ (and then
                // removed record files): the catalogue it committed first is the whole vault.
                if try migratedMeanwhile() {
                    try openCatalogueToRead()
                    return try readRecords()
                }
            }
        } catch { throw VaultError.wrap(error) }
        return (found, damaged)
    }

    /// Every item, in ID order from `start` on (all when nil), expired fade items included, in
    /// batches to `body` until it returns false: memory for a batch, not for the vault (issue
    /// 34), and no cache. One call reads one state of the vault (one read transaction); a
    /// caller that reads it again and needs the same state holds the vault lock (opened for
    /// writing). Records that do not open are given as damaged IDs beside each batch; a
    /// caller that refuses or reports them asks `damagedItemErrors()`, which first tries keys
    /// another process may have rotated in meanwhile. A version 1 vault read without the
    /// lock (not yet migrated) is read whole and given in the same batches.
    public func forEachItemInIDOrder(from start: String? = nil, batchSize: Int = 1024,
                                     _ body: (_ items: [ItemMetadata], _ damaged: [String]) throws -> Bool) throws {
        guard let catalogue else {
            let all = try items(includeExpired: true).filter { $0.id >= start ?? "" }.sorted { $0.id < $1.id }
            let damaged = try damagedItemIDs()
            for first in stride(from: 0, to: max(all.count, 1), by: max(1, batchSize)) {
                let batch = Array(all[first..<min(all.count, first + max(1, batchSize))])
                guard try body(batch, first == 0 ? damaged : []) else { return }
            }
            return
        }
        var stoppedBy: (any Error)?
        do {
            let keys = try recordKeys()
            try catalogue.readInIDOrder(from: start, batchSize: max(1, batchSize), pending: takePendingMoves) { batch in
                let opened = Self.openRecords(batch.map { ($0.id, $0.sealed) }, keys: keys)
                // The parts come back in order, each in its records' order: the batch stays sorted.
                do { return try body(opened.found, opened.damaged) } catch { stoppedBy = error; return false }
            }
        } catch { throw VaultError.wrap(error) }
        // The caller's own errors reach it as they are.
        if let stoppedBy { throw stoppedBy }
    }

    /// Every item, as `forEachItemInIDOrder` gives them, but in batches in the order of
    /// their content files' inodes (`ContentFileOrder`), for a pass that reads every content
    /// file: about in sequence on the disk, where ID order is at random. Items whose file
    /// was not listed (missing, or waiting for a pending move) come last, in ID order. One
    /// state of the catalogue throughout; a v1 vault (no catalogue) goes in ID order.
    /// `body` runs while the next batch's records are looked up and opened on another thread
    /// (`ProducedAhead`): it must not use this vault's catalogue (reading content files is
    /// what it is for).
    public func forEachItemInDiskOrder(batchSize: Int = 1024,
                                       _ body: (_ items: [ItemMetadata], _ damaged: [String]) throws -> Bool) throws {
        guard let catalogue else { return try forEachItemInIDOrder(batchSize: batchSize, body) }
        // Rows are looked up in inode order, at random in the catalogue: from a cold cache,
        // its file is read in one sweep while the content files are listed (3,000,000 notes).
        let warmer = catalogue.warmCache()
        defer { warmer?.stop() }
        let files: ContentFileOrder
        do { files = try ContentFileOrder(vaultPath: path) } catch { throw VaultError.wrap(error) }
        var stoppedBy: (any Error)?
        do {
            try catalogue.reading {
                let keys = try recordKeys()
                takePendingMoves(try catalogue.pendingOperations())
                // Each row is given once: an item where its kind's file is, a damaged record
                // (whose kind is sealed in it) at the first file of its ID. Counted, so that the
                // pass for the rest is made only if there is a rest.
                var given: Int64 = 0, stopped = false, damagedGiven = Set<String>()
                // The next batch's records are looked up while `body` reads this one's files:
                // at 3,000,000 notes each lookup read two or three catalogue pages, a quarter
                // of this thread's time (BENCHMARKS.md), with the second core half idle.
                try ProducedAhead.run(produce: { give in
                    try files.forEachBatch(of: max(1, batchSize)) { listed in
                        // The batch's IDs in inode order, each once, with the folders it was listed in.
                        var kinds: [String: Set<ItemKind>] = [:], ids: [String] = []
                        for file in listed {
                            if kinds[file.id] == nil { ids.append(file.id) }
                            kinds[file.id, default: []].insert(file.kind)
                        }
                        // A listed file no row names (a leftover, or an item removed since) is not an item.
                        let rows = try ids.compactMap { id in try catalogue.record(id: id).map { (id: id, sealed: Optional($0)) } }
                        guard !rows.isEmpty else { return true }
                        let opened = Self.openRecords(rows, keys: keys)
                        return give((opened.found.filter { kinds[$0.id]?.contains($0.kind) == true },
                                     opened.damaged.filter { damagedGiven.insert($0).inserted }))
                    }
                }, consume: { (found: [ItemMetadata], damaged: [String]) in
                    given += Int64(found.count + damaged.count)
                    do { stopped = try !body(found, damaged) } catch { stoppedBy = error; stopped = true }
                    return !stopped
                })
                // The rows whose file was not listed, if any: the catalogue once more, in ID order.
                guard !stopped, given < (try catalogue.count()) else { return }
                try catalogue.readInIDOrder(from: nil, batchSize: max(1, batchSize)) { batch in
                    let opened = Self.openRecords(batch.map { (id: $0.id, sealed: Optional($0.sealed)) }, keys: keys)
                    let found = try opened.found.filter { try !files.lists(id: $0.id, kind: $0.kind) }
                    let damaged = try opened.damaged.filter { try !files.lists(id: $0, kind: nil) }
                    guard !found.isEmpty || !damaged.isEmpty else { return true }
                    do { return try body(found, damaged) } catch { stoppedBy = error; return false }
                }
            }
        } catch { throw VaultError.wrap(error) }
        if let stoppedBy { throw stoppedBy }
    }

    /// Every key a record may be sealed under, with its compartment and key ID.
    private func recordKeys() throws -> [(Compartment, SecureBytes, [UInt8])] {
        try Compartment.allCases.flatMap { compartment in
            try keyStore.openingKeys(for: compartment).map { (compartment, $0, try CompartmentKeyRing.id(of: $0)) }
        }
    }

    /// A reader takes a pending move's source as the item's file until it has moved.
    private func takePendingMoves(_ lines: [String]) {
        pendingMoves = [:]
        for line in lines {
            if case let .move(staged, target)? = VaultStaging.Operation(line: Substring(line)) { pendingMoves[target] = staged }
        }
    }

    /// Whether a v1 vault this reader opened has a catalogue now (a writer migrated it).
    private func migratedMeanwhile() throws -> Bool {
        if catalogue != nil { return false }
        return try FileStatus.of(Path.join(path, VaultCatalogue.fileName)) != nil
    }

    private func openingKeyIDs() throws -> [[UInt8]] {
        try Compartment.allCases.flatMap { try keyStore.openingKeys(for: $0).map(CompartmentKeyRing.id(of:)) }
    }

    /// Opens sealed records over up to four threads (nil bytes: a record that could not be read).
    private static func openRecords(_ records: [(id: String, sealed: [UInt8]?)],
                                    keys: [(Compartment, SecureBytes, [UInt8])]) -> (found: [ItemMetadata], damaged: [String]) {
        let parts = max(1, min(ProcessInfo.processInfo.activeProcessorCount, 4, records.count / 256))
        var results = [(found: [ItemMetadata], damaged: [String])](repeating: ([], []), count: parts)
        results.withUnsafeMutableBufferPointer { slots in
            let slots = UncheckedSendable(slots)
            let shared = UncheckedSendable((records, keys))
            DispatchQueue.concurrentPerform(iterations: parts) { part in
                let (records, keys) = shared.value
                let range = (records.count * part / parts)..<(records.count * (part + 1) / parts)
                slots.value[part] = openRecords(records[range], keys: keys)
            }
        }
        return (results.flatMap(\.found), results.flatMap(\.damaged))
    }

    /// Opens records; touches nothing shared but the read-only keys, so several run at once.
    private static func openRecords(_ records: ArraySlice<(id: String, sealed: [UInt8]?)>,
                                    keys: [(Compartment, SecureBytes, [UInt8])]) -> (found: [ItemMetadata], damaged: [String]) {
        var found: [ItemMetadata] = []
        var damaged: [String] = []
        found.reserveCapacity(records.count)
        // One cipher context per key for the whole slice, not one per record and key.
        let openers = keys.map { compartment, key, keyID in
            (compartment, try? AEADOpener(ItemMetadata.algorithm, key: key), keyID)
        }
        for (id, sealed) in records {
            // A record that does not open is reported, not fatal: one damaged record must not
            // keep the user from every other item (or from removing or restoring that one).
            guard let sealed, let opened = openers.lazy.compactMap({ compartment, opener, keyID -> ItemMetadata? in
                      guard let opener, var item = ItemMetadata.open(sealed, id: id, opener: opener),
                            item.compartment == compartment else { return nil }
                      item.keyID = keyID
                      return item
                  }).first else {
                damaged.append(id)
                continue
            }
            found.append(opened)
        }
        return (found, damaged)
    }

    /// IDs whose metadata record exists but does not open (damaged, or not this key store's).
    public func damagedItemIDs() throws(VaultError) -> [String] {
        _ = try allItems()
        return cachedDamaged
    }

    /// The errors for damaged records, naming each file.
    public func damagedItemErrors() throws(VaultError) -> [VaultError] {
        try damagedItemIDs().map { .itemDamaged(id: $0, path: recordPath(id: $0)) }
    }

    /// What the vault holds under one ID.
    public enum Lookup: Equatable {
        case absent
        /// Its record, expired or not.
        case item(ItemMetadata)
        /// A record that opens with none of this key store's keys, even read again.
        case damaged
    }

    /// Runs `body`, whose `lookUp`s then read one state of the catalogue in one read
    /// transaction: SQLite takes and drops its locks once, not for every lookup (four
    /// `fcntl` calls each). Not around a change: a change is a transaction of its own. Only
    /// with the vault lock held: a reader without it (a dry run) would keep an old state
    /// while another process changes the vault and moves its files, so it reads as before.
    public func readingOneState<T>(_ body: () throws -> T) throws -> T {
        guard let catalogue, lock != nil else { return try body() }
        return try catalogue.reading(body)
    }

    /// The vault's item `id`, read by itself: a restore of millions of items asks item by
    /// item instead of holding every record (issue 34). A record that does not open is
    /// retried once with the key store read again (another process may have rotated the
    /// keys). A version 1 vault read without the lock (its records still files) is read whole
    /// once.
    public func lookUp(id: String) throws(VaultError) -> Lookup {
        guard let catalogue else {
            if try damagedItemIDs().contains(id) { return .damaged }
            // By ID, made once: a scan per lookup would be quadratic in a restore's dry run.
            if lookupIndex == nil {
                let all = try items(includeExpired: true)
                lookupIndex = Dictionary(all.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
            }
            let index = lookupIndex ?? [:]
            return index[id].map { .item($0) } ?? .absent
        }
        do {
            if !lookupReadMoves {
                // The pending moves of the moment of the first lookup (a writer has none: it
                // carried them out when it opened the vault).
                for line in try catalogue.pendingOperations() {
                    if case let .move(staged, target)? = VaultStaging.Operation(line: Substring(line)) { pendingMoves[target] = staged }
                }
                lookupReadMoves = true
            }
            guard let sealed = try catalogue.record(id: id) else { return .absent }
            for attempt in 0..<2 {
                if lookupKeys == nil || attempt == 1 {
                    lookupKeys = try recordKeys()
                }
                if let item = Self.openRecords([(id: id, sealed: Optional(sealed))][...], keys: lookupKeys ?? []).found.first { return .item(item) }
                guard attempt == 0, !refreshedForLookup else { break }
                refreshedForLookup = true
                guard keyStore.refreshCompartmentKeys() else { break }
            }
            return .damaged
        } catch { throw VaultError.wrap(error) }
    }

    /// Where an item's record is, for messages: the catalogue (or a v1 vault's record file).
    func recordPath(id: String) -> String {
        catalogue?.path ?? MetaDirectory.recordPath(id: id, in: path)
    }

    /// Removes an item with a damaged record: its row and either kind of content file, in one
    /// commit.
    public func removeDamaged(id: String) throws(VaultError) {
        precondition(lock != nil, "vault opened read-only")
        let staging = try VaultStaging(vault: self)
        try staging.stageRemoval(damagedID: id)
        try staging.commit()
    }

    /// Finds a live item by its full UUID or a unique prefix of at least 4 characters, and
    /// with `orName` (what `vault cat` allows) failing those by a name or glob that only one
    /// item matches (see `ItemSelection.single`).
    public func item(matching pattern: String, orName: Bool = false, now: Date = Date()) throws(VaultError) -> ItemMetadata {
        let all = try allItems()
        let index: Int
        do throws(ItemSelection.Problem) {
            index = try ItemSelection.single(pattern, in: all, id: \.id, name: orName ? { $0.name } : nil)
        } catch {
            switch error {
            case .prefixTooShort(let prefix): throw .prefixTooShort(prefix)
            case .noMatch: throw .itemNotFound(id: pattern, vault: path)
            case .ambiguous(_, let matches): throw .ambiguousID(prefix: pattern, matches: matches.count)
            }
        }
        return try live(all[index], now: now)
    }

    private func live(_ item: ItemMetadata, now: Date) throws(VaultError) -> ItemMetadata {
        if item.isExpired(at: now) { throw .itemExpired(id: item.id) }
        return item
    }

    public func contentPath(of item: ItemMetadata) -> String { Path.join(path, item.relativePath) }

    /// Where to open an item's content, in order: where a committed change left it until its
    /// pending move runs, then its place (the move may have run since the catalogue was read).
    func contentPaths(of item: ItemMetadata) -> [String] {
        (pendingMoves[item.relativePath].map { [Path.join(path, $0)] } ?? []) + [contentPath(of: item)]
    }
    public var isWritable: Bool { lock != nil }

    func forgetCachedItems() {
        cachedItems = nil
        lookupKeys = nil
        lookupReadMoves = false
        lookupIndex = nil
        cachedDamaged = []
        pendingMoves = [:]
    }

    // MARK: reading items

    /// The item's file, opened and given its cheap checks (see `SealedVaultItem`).
    public func sealedItem(_ item: ItemMetadata) throws(VaultError) -> SealedVaultItem {
        try SealedVaultItem(item, paths: contentPaths(of: item), keyStore: keyStore)
    }

    /// Decrypts an item into `sink`; returns normally only if its tag verified and the
    /// content is the one its metadata names. Until then the sink must keep what it got
    /// out of sight (see `UnverifiedPlaintextSink`).
    public func read(_ item: ItemMetadata, into sink: UnverifiedPlaintextSink) throws(VaultError) {
        try sealedItem(item).read(into: sink)
    }

    /// For a sink that cannot stage (stdout): verifies the whole item, then decrypts it again
    /// from the same open file, so what is decrypted is what was verified.
    public func verifyThenRead(_ item: ItemMetadata, into sink: UnverifiedPlaintextSink) throws(VaultError) {
        let sealed = try sealedItem(item)
        try sealed.read(into: DiscardingSink())
        try sealed.read(into: sink)
    }

    /// Checks an item's tag without keeping any plaintext.
    public func verify(_ item: ItemMetadata) throws(VaultError) {
        try read(item, into: DiscardingSink())
    }

    // MARK: changing the vault

    /// What to add: where the bytes come from and how the item is described.
    public struct NewItem {
        /// Opens the item's bytes; called when the item is encrypted (and, if `rereadable`,
        /// before, to compare its content with an item of the same size).
        public let open: () throws -> ByteSource
        public let kind: ItemKind
        public let name: String
        public let compartment: Compartment
        public let expires: Date?
        /// The size it will likely have (a file's, when checked): buffers are sized to it, so
        /// a small item does not pay for a large one's.
        public let sizeHint: Int64?
        /// The item's created time; nil for the time of the add.
        public let created: Date?
        /// Whether `open` gives the bytes afresh each time (a file, bytes in memory; not stdin).
        public let rereadable: Bool
        /// Whether `open` gives bytes already in memory, `sizeHint` of them (a note read
        /// whole): a small one is sealed in memory and its file written on another thread.
        let inMemory: Bool

        public init(opening open: @escaping () throws -> ByteSource, kind: ItemKind, name: String,
                    compartment: Compartment, expires: Date?, sizeHint: Int64? = nil, created: Date? = nil, rereadable: Bool = false) {
            self.init(opening: open, kind: kind, name: name, compartment: compartment, expires: expires, sizeHint: sizeHint,
                      created: created, rereadable: rereadable, inMemory: false)
        }

        private init(opening open: @escaping () throws -> ByteSource, kind: ItemKind, name: String, compartment: Compartment,
                     expires: Date?, sizeHint: Int64?, created: Date?, rereadable: Bool, inMemory: Bool) {
            self.inMemory = inMemory
            self.open = open
            self.kind = kind
            self.name = name
            self.compartment = compartment
            self.expires = expires
            self.sizeHint = sizeHint
            self.created = created
            self.rereadable = rereadable
        }

        /// Read once from `source` (stdin, say), created at the time of the add.
        public init(source: ByteSource, kind: ItemKind, name: String, compartment: Compartment, expires: Date?,
                    sizeHint: Int64? = nil) {
            self.init(opening: { source }, kind: kind, name: name, compartment: compartment, expires: expires, sizeHint: sizeHint)
        }

        /// A checked file, created at its modification time.
        public init(file: InputFile, kind: ItemKind, name: String, compartment: Compartment, expires: Date?) {
            self.init(opening: file.open, kind: kind, name: name, compartment: compartment, expires: expires,
                      sizeHint: file.size, created: file.modified, rereadable: true)
        }

        /// A note file read whole (`InputFile.readNote(at:)`), created at its modification
        /// time: the duplicate check and the encryption read these bytes, not the file again.
        public init(note: NoteFile, name: String, compartment: Compartment, expires: Date?) {
            let bytes = note.bytes
            self.init(opening: { MemorySource(bytes) }, kind: .note, name: name, compartment: compartment, expires: expires,
                      sizeHint: Int64(bytes.count), created: note.file.modified, rereadable: true, inMemory: true)
        }

        /// Bytes held in memory (a note), created at the time of the add.
        public init(bytes: [UInt8], kind: ItemKind, name: String, compartment: Compartment, expires: Date?) {
            self.init(opening: { MemorySource(bytes) }, kind: kind, name: name, compartment: compartment, expires: expires,
                      sizeHint: Int64(bytes.count), created: nil, rereadable: true, inMemory: true)
        }
    }

    /// A new item `add` left out because the vault (or the same add) already holds its content.
    public struct Duplicate: Sendable {
        /// The new item's name.
        public let name: String
        /// The live item of the same kind, compartment and content.
        public let existing: ItemMetadata
        /// Whether `existing` is an item of this same add (a file given twice, or two copies
        /// of one photo in a folder), not one the vault held before.
        public let addedInThisCall: Bool
    }

    /// Encrypts and stores items all at once: each is staged out of sight, and one journaled
    /// commit publishes them (see `VaultStaging`), so a failure or a kill adds none of them.
    /// `progress` counts the bytes read (its totals are the caller's to announce) and each
    /// item; `staged` follows each item as it is sealed, before the commit.
    ///
    /// With `skippingDuplicates`, an item whose content a live item of the same kind and
    /// compartment already has (in the vault, or added before it in `items`), and still
    /// verifies, is left out and handed to `skipped`; fade items are always added. Only items of a size some such item has are read to compare: a
    /// first add reads nothing twice. An item that is not `rereadable` (stdin) is always added.
    public func add(_ items: [NewItem], now: Date = Date(), skippingDuplicates: Bool = false, progress: VaultChangeProgress? = nil,
                    staged: (ItemMetadata) -> Void = { _ in }, skipped: (Duplicate) -> Void = { _ in }) throws(VaultError) -> [ItemMetadata] {
        // Every name is checked before anything is written.
        for new in items { try Self.check(new) }
        var next = items.makeIterator(), added: [ItemMetadata] = []
        try add(from: { next.next() }, count: items.count, now: now, skippingDuplicates: skippingDuplicates, progress: progress,
                staged: { staged($0); added.append($0) }, skipped: skipped)
        return added
    }

    /// `add` of items handed out one at a time by `next` (nil after the last), holding none of
    /// them (issue 34): a bad item found part-way adds none. Returns how many were added.
    /// `count`, how many items `next` will hand out when the caller knows, makes the new IDs
    /// of an add of more than `ascendingIDsAbove` items ascend (`AscendingItemIDs`): their
    /// rows go into the catalogue as they come instead of being spooled in sorted runs and
    /// merged at the commit. Otherwise they are random.
    @discardableResult
    public func add(from next: () throws -> NewItem?, count expected: Int? = nil, now: Date = Date(), skippingDuplicates: Bool = false,
                    progress: VaultChangeProgress? = nil, staged: (ItemMetadata) throws -> Void = { _ in },
                    skipped: (Duplicate) throws -> Void = { _ in }) throws(VaultError) -> Int {
        precondition(lock != nil, "vault opened read-only")
        let known = skippingDuplicates ? try KnownContent(self, now: now) : nil
        let staging = try VaultStaging(vault: self)
        var count = 0, ids = AscendingItemIDs(count: expected.map { $0 > ascendingIDsAbove ? $0 : 0 } ?? 0)
        do {
            while let new = try next() {
                try Self.check(new)
                // An item whose content no longer verifies (bit rot) is no copy to keep: adding
                // the original again is how it is repaired.
                // A match found among this add's items is read back: their files must be written.
                if let known, new.compartment != .fade,
                   let existing = try known.item(with: new, in: self, beforeReadingOne: staging.waitForWrites) {
                    if let size = new.sizeHint { progress?.add(bytes: size) }
                    progress?.itemDone()
                    try skipped(Duplicate(name: new.name, existing: existing.item, addedInThisCall: existing.ofThisAdd))
                    continue
                }
                let item: ItemMetadata
                if new.inMemory, let size = new.sizeHint, size <= VaultStaging.writtenBesideLimit {
                    let source = try new.open()
                    item = try staging.stageNew(id: ids.next(), kind: new.kind, compartment: new.compartment, name: new.name,
                                                created: new.created ?? now, expires: new.expires,
                                                sealing: progress.map { ProgressCountingSource(source, progress: $0) } ?? source,
                                                sizeHint: size)
                } else {
                    item = try staging.stage(id: ids.next(), kind: new.kind, compartment: new.compartment,
                                             name: new.name, created: new.created ?? now, expires: new.expires, replaces: nil,
                                             aroundPageCache: (new.sizeHint ?? 0) >= VaultStaging.addedAroundPageCacheFrom) { file, key in
                        let source = try new.open()
                        return try SealedVaultItem.sealNew(progress.map { ProgressCountingSource(source, progress: $0) } ?? source,
                                                           key: key, to: file, sizeHint: new.sizeHint)
                    }
                }
                progress?.itemDone()
                try staged(item)
                count += 1
                try known?.insert(item)
            }
        } catch {
            staging.discard()
            throw VaultError.wrap(error)
        }
        // Once committed, a Ctrl-C lets the add finish and list what it added.
        try staging.commit(committing: "the add")
        progress?.finish()
        return count
    }

    private static func check(_ new: NewItem) throws(VaultError) {
        try ItemMetadata.checkName(new.name)
        guard (new.compartment == .fade) == (new.expires != nil) else {
            throw .invalidCompartmentUse("fade items, and only they, have an expiry")
        }
    }

    public func add(_ new: NewItem, now: Date = Date()) throws(VaultError) -> ItemMetadata {
        let added = try add([new], now: now)
        return added[0]
    }

    /// Removes items all at once (one journaled commit): metadata first, then content.
    public func remove(_ items: [ItemMetadata]) throws(VaultError) {
        precondition(lock != nil, "vault opened read-only")
        let staging = try VaultStaging(vault: self)
        do throws(VaultError) { for item in items { try staging.stageRemoval(item) } } catch {
            staging.discard()
            throw error
        }
        try staging.commit()
    }

    public func remove(_ item: ItemMetadata) throws(VaultError) { try remove([item]) }

    /// Removes every expired fade item; returns what was removed.
    public func purgeExpired(now: Date = Date()) throws(VaultError) -> [ItemMetadata] {
        let expired = try allItems().filter { $0.isExpired(at: now) }
        if !expired.isEmpty { try remove(expired) }
        return expired
    }
}

/// Hands a value to `DispatchQueue.concurrentPerform` where the caller guarantees the
/// concurrent uses do not conflict (each iteration writes its own slot; the vault is only read).
private struct UncheckedSendable<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

/// The live items' content by kind, compartment and size, for `Vault.add` to find a new item
/// that is already there. The digest of a new item is computed only when some item has its
/// size, so photos of distinct sizes (nearly all of them) are never read twice. A match is
/// read back by ID and compared in full. Fade items never count, either way: each has its own
/// expiry, and a copy that is about to expire must not keep a new one out.
///
/// Held in a scratch SQLite database (`SQLiteDatabase.scratch`), not in memory (issue 34):
/// even two 64-bit digests and an ID per live item made `vault add` grow by 80 MiB per
/// million items. What it holds is `ScratchDigest`s (keyed afresh by each add) and item IDs,
/// which the catalogue shows anyway: nothing about names or content.
///
/// Content digests are random, so past a few hundred thousand items each new item's lookup
/// and insert touched an index page not in the database's cache (about 22 µs a note at
/// 1,000,000, BENCHMARKS.md). A `DigestFilter` answers most lookups of new content without
/// the database, and the new items' digests wait in memory (`pending`, at most
/// `pendingLimit`) to go in in digest order, touching each index page once a batch.
private final class KnownContent {
    /// Pages SQLite may keep in memory: what the scratch database outgrows goes to its file.
    private static let cacheKiB = 4096
    /// New items' content digests held before they go into the database in order (a test,
    /// `duplicatesAcrossPendingAndDatabase`, adds 33,000 items to pass it).
    private static let pendingLimit = 32_768
    private let database: SQLiteDatabase
    private let digests: ScratchDigest
    private let insertSize: SQLiteStatement
    private let insertContent: SQLiteStatement
    private let findSize: SQLiteStatement
    private let findContent: SQLiteStatement
    /// Every content digest inserted, the database's and `pending`'s.
    private var filter = DigestFilter()
    /// IDs held inline, not as arrays: no allocation per item.
    private var pending: [(key: Int64, id: uuid_t)] = []
    private var pendingKeys = Set<Int64>()
    /// The last row of the vault's own items in `contents`: rows after it are this add's.
    private var lastVaultRow: Int64 = 0
    /// The size last asked about, and its key: `item(with:)` and then `insert` ask about the
    /// same item's size, and notes often share one.
    private var lastSizeKey: (kind: ItemKind, compartment: Compartment, size: Int64, key: Int64)?
    /// Size keys found in or put into `sizes`, so that notes of the same few lengths ask
    /// SQLite once each (two lookups a note before); emptied when it reaches
    /// `knownSizesLimit`, so it stays small whatever the vault holds.
    private var knownSizes = Set<Int64>()
    private static let knownSizesLimit = 4096

    /// The vault's live items but fade ones, read a batch at a time.
    init(_ vault: Vault, now: Date) throws(VaultError) {
        do {
            digests = try ScratchDigest()
            database = try SQLiteDatabase.scratch(purpose: "the duplicate check's scratch database (in $TMPDIR)", cacheKiB: Self.cacheKiB)
            try database.execute("""
                CREATE TABLE sizes(key INTEGER NOT NULL);
                CREATE TABLE contents(key INTEGER NOT NULL, id BLOB NOT NULL);
                """)
            insertSize = try database.prepare("INSERT INTO sizes(key) VALUES (?1)")
            insertContent = try database.prepare("INSERT INTO contents(key, id) VALUES (?1, ?2)")
            // Compiled now; SQLite compiles them again once the indexes below exist.
            findSize = try database.prepare("SELECT 1 FROM sizes WHERE key = ?1 LIMIT 1")
            findContent = try database.prepare("SELECT id, rowid FROM contents WHERE key = ?1")
            try vault.forEachItemInIDOrder { batch, _ in
                for item in batch where item.compartment != .fade && !item.isExpired(at: now) {
                    guard let (size, content, id) = keys(of: item) else { continue }
                    try insertSize.bind(1, size)
                    try insertSize.step()
                    try putContent(content, id)
                }
                return true
            }
            // Indexed once filled: SQLite sorts the rows in bounded memory, where inserting
            // each into an index would touch a random page per row.
            try database.execute("""
                CREATE INDEX sizes_by_key ON sizes(key);
                CREATE INDEX contents_by_key ON contents(key);
                """)
            lastVaultRow = try database.integer("SELECT coalesce(max(rowid), 0) FROM contents") ?? 0
        } catch { throw VaultError.wrap(error) }
    }

    private func sizeKey(_ kind: ItemKind, _ compartment: Compartment, _ size: Int64) -> Int64 {
        if let last = lastSizeKey, last.kind == kind, last.compartment == compartment, last.size == size { return last.key }
        let key = digests.digest([kind.rawValue, compartment.rawValue, String(size)])
        lastSizeKey = (kind, compartment, size, key)
        return key
    }

    /// Whether some item has the size `key` stands for: from `knownSizes`, else the database.
    private func isKnownSize(_ key: Int64) throws -> Bool {
        if knownSizes.contains(key) { return true }
        try findSize.bind(1, key)
        defer { findSize.reset() }
        guard try findSize.step() else { return false }
        remember(size: key)
        return true
    }

    private func remember(size key: Int64) {
        if knownSizes.count >= Self.knownSizesLimit { knownSizes.removeAll(keepingCapacity: true) }
        knownSizes.insert(key)
    }

    private func contentKey(_ kind: ItemKind, _ compartment: Compartment, _ size: Int64, _ sha256: String) -> Int64 {
        digests.digest([kind.rawValue, compartment.rawValue, String(size), sha256])
    }

    private func keys(of item: ItemMetadata) -> (size: Int64, content: Int64, id: uuid_t)? {
        guard let id = ItemID.bytes(of: item.id) else { return nil }
        return (sizeKey(item.kind, item.compartment, item.size), contentKey(item.kind, item.compartment, item.size, item.sha256), id)
    }

    private func putContent(_ key: Int64, _ id: uuid_t) throws {
        try insertContent.bind(1, key)
        try insertContent.bind(2, blob: withUnsafeBytes(of: id) { Array($0) })
        try insertContent.step()
        filter.insert(key)
    }

    /// A new item, staged: found by the items after it in the same add.
    func insert(_ item: ItemMetadata) throws {
        guard let (size, content, id) = keys(of: item) else { return }
        // Many items share a size (notes of one length): it is recorded once.
        if try !isKnownSize(size) {
            try insertSize.bind(1, size)
            try insertSize.step()
            remember(size: size)
        }
        pending.append((content, id))
        pendingKeys.insert(content)
        filter.insert(content)
        if pending.count >= Self.pendingLimit { try flush() }
    }

    /// Puts the pending digests into the database in digest order.
    private func flush() throws {
        pending.sort { $0.key < $1.key }
        for (key, id) in pending { try putContent(key, id) }
        pending.removeAll(keepingCapacity: true)
        pendingKeys.removeAll(keepingCapacity: true)
    }

    /// A known item with `new`'s content that still verifies, if any.
    /// `beforeReadingOne` runs before the content file of an item of this add is read (its
    /// file may still be on its way: `VaultStaging.stageNew`).
    func item(with new: Vault.NewItem, in vault: Vault,
              beforeReadingOne: () throws -> Void) throws(VaultError) -> (item: ItemMetadata, ofThisAdd: Bool)? {
        guard new.rereadable, let size = new.sizeHint else { return nil }
        do {
            guard try isKnownSize(sizeKey(new.kind, new.compartment, size)) else { return nil }
        } catch { throw VaultError.wrap(error) }
        let digest: String
        do {
            let hasher = try SHA256Digest()
            let source = try new.open()
            var buffer = [UInt8](repeating: 0, count: Int(min(size, 1 << 20)) + 1)
            var total: Int64 = 0
            while true {
                let n = try source.read(into: &buffer, offset: 0, count: buffer.count)
                if n == 0 { break }
                hasher.update(buffer[0..<n])
                total += Int64(n)
            }
            // Changed since it was checked: not the same content, whatever the digest.
            guard total == size else { return nil }
            digest = try hasher.finish().hex
        } catch {
            throw VaultError.wrap(error)
        }
        // Two contents may share a 64-bit digest: only the very same content counts.
        let key = contentKey(new.kind, new.compartment, size, digest)
        guard filter.mayContain(key) else { return nil }
        // A pending match is looked for only when its key is there (a duplicate, or two
        // contents sharing a digest): a pass over at most `pendingLimit` entries.
        var candidates = pendingKeys.contains(key)
            ? pending.filter { $0.key == key }.map { (id: ItemID.text(of: $0.id), ofThisAdd: true) } : []
        do {
            try findContent.bind(1, key)
            defer { findContent.reset() }
            while try findContent.step() {
                let bytes = findContent.blob(0)
                guard bytes.count == 16 else { continue }
                candidates.append((ItemID.text(of: bytes), findContent.int64(1) > lastVaultRow))
            }
        } catch { throw VaultError.wrap(error) }
        // Copies of the vault's own items (adding a folder again) go on without waiting.
        if candidates.contains(where: \.ofThisAdd) {
            do { try beforeReadingOne() } catch { throw VaultError.wrap(error) }
        }
        for (id, ofThisAdd) in candidates {
            guard case .item(let found) = try vault.lookUp(id: id) else { continue }
            // A copy whose content no longer verifies (bit rot) is no copy: another may be.
            if found.kind == new.kind, found.compartment == new.compartment, found.size == size, found.sha256 == digest,
               (try? vault.verify(found)) != nil {
                return (found, ofThisAdd)
            }
        }
        return nil
    }
}
