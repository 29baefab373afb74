import Foundation
import N11Crypto
import N11Format
import N11System

/// A vault directory (seed 003 layout):
///
///     .n11vault              marker: vault ID and a check sealed under the vault key
///     Photos/{UUID}.n11      12-byte nonce ‖ ChaCha20-Poly1305 ciphertext ‖ 16-byte tag
///     Notes/{UUID}.n11note   the same, for UTF-8 notes
///     Meta/{UUID}.n11meta    the item's metadata, sealed under its compartment's key
///     .lock                  held while a process changes the vault
///
/// Every file appears atomically. An item exists once its metadata file exists; a content
/// file without metadata is the remains of an interrupted add and is removed by the next
/// process that opens the vault for writing.
public final class Vault: @unchecked Sendable {
    public let path: String
    public let keyStore: KeyStore
    private var lock: FileLock?
    /// What opening for writing created, decided under the lock: only this may be taken back.
    private var created = (directory: false, layout: false)
    private var cachedItems: [ItemMetadata]?
    private var cachedDamaged: [String] = []

    static let markerName = ".n11vault"
    static let metaDirectory = "Meta"
    static let metaExtension = "n11meta"
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
    public static func open(at path: String, keyStore: KeyStore, forWriting: Bool,
                            lockWait: Double = 0) throws(VaultError) -> Vault {
        let vault = Vault(path: Path.absolute(path), keyStore: keyStore)
        do {
            let status = try FileStatus.of(vault.path, followLinks: true)
            if let status, status.kind != .directory { throw VaultError.notAVault(path: vault.path) }
            // Reading a vault that is not there is a missing input, not a wrong directory.
            if status == nil && !forWriting { throw VaultError.vaultMissing(path: vault.path) }
            // Decide before creating anything (even the lock file) in a directory that is not ours.
            if status != nil, !(try vault.isNewOrUnfinished()), ((try? FileStatus.of(vault.markerPath)) ?? nil) == nil {
                throw VaultError.notAVault(path: vault.path)
            }
            if forWriting {
                // Lock first, then decide whether to create the layout: two processes starting
                // the same new vault must not both try to write its marker.
                if status == nil { vault.created.directory = try Directory.ensure(vault.path, mode: 0o700) }
                try vault.takeLock(wait: lockWait)
                if try vault.isNewOrUnfinished() {
                    vault.created.layout = true
                    try vault.createLayout()
                }
            }
            guard ((try? FileStatus.of(vault.markerPath)) ?? nil) != nil else { throw VaultError.notAVault(path: vault.path) }
            try vault.checkMarker()
            if forWriting { try vault.removeLeftovers() }
        } catch {
            if vault.lock != nil { vault.removeIfCreated() }
            throw VaultError.wrap(error)
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
        let layout = [ItemKind.photo.directory, ItemKind.note.directory, Self.metaDirectory]
        // Anything in an item directory (a commit that got past its commit point, say) keeps
        // the vault. Checked under the lock, so nobody adds to it meanwhile.
        for sub in layout where !((try? Directory.entries(of: Path.join(path, sub), sorted: false)) ?? []).isEmpty { return false }
        // The marker first: without it the rest is an unfinished layout, which the next open
        // completes; with it but without item directories it would be a broken vault.
        guard (try? FileSystem.removeFile(markerPath)) != nil else { return false }
        created.layout = false
        AtomicFile.removeLeftovers(in: path)
        // rmdir, never a recursive removal.
        for sub in layout where (try? FileSystem.removeEmptyDirectory(Path.join(path, sub))) == nil { return false }
        guard created.directory else { return true }
        try? FileSystem.removeFile(Path.join(path, ".lock"))
        return (try? FileSystem.removeEmptyDirectory(path, missingIsDone: false)) != nil
    }

    /// Whether `path` could be opened for writing as a vault (missing, empty, or a vault):
    /// lets `init` refuse a bad --vault before it creates anything.
    public static func canCreateOrOpen(at path: String) -> Bool {
        guard let status = (try? FileStatus.of(Path.absolute(path), followLinks: true)) ?? nil else { return true }
        guard status.kind == .directory, let names = try? Directory.entries(of: path) else { return false }
        return names.allSatisfy({ $0 == ".lock" }) || names.contains(markerName)
    }

    private var markerPath: String { Path.join(path, Self.markerName) }

    /// Empty, or holding only what an interrupted `createLayout` leaves (empty item
    /// directories, the marker's temp file, no marker yet).
    private func isNewOrUnfinished() throws -> Bool {
        let layout: Set<String> = [".lock", ItemKind.photo.directory, ItemKind.note.directory, Self.metaDirectory]
        for name in try Directory.entries(of: path) where !name.hasPrefix(AtomicFile.tempPrefix) {
            guard layout.contains(name) else { return false }
            if name != ".lock", !(try Directory.entries(of: Path.join(path, name))).isEmpty { return false }
        }
        return true
    }

    private func createLayout() throws {
        try Directory.ensure(path, mode: 0o700)
        AtomicFile.removeLeftovers(in: path)   // an interrupted earlier attempt's marker
        for sub in [ItemKind.photo.directory, ItemKind.note.directory, Self.metaDirectory] {
            try Directory.ensure(Path.join(path, sub), mode: 0o700)
        }
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

    /// Temp files of killed writers and interrupted commits (finished or discarded). Content
    /// files are only ever removed through a commit journal, never by guessing that one is
    /// an orphan: a listing that fails (permissions, EMFILE) must not look like "no items".
    private func removeLeftovers() throws {
        for sub in [ItemKind.photo.directory, ItemKind.note.directory, Self.metaDirectory] {
            AtomicFile.removeLeftovers(in: Path.join(path, sub))
        }
        AtomicFile.removeLeftovers(in: path)
        // Finish or discard interrupted commits before anything else looks at the items.
        try VaultStaging.recover(in: path, keyStore: keyStore)
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
        let metaDir = Path.join(path, Self.metaDirectory)
        let names: [String]
        // Unsorted: the items are sorted by creation time below.
        do { names = try Directory.entries(of: metaDir, sorted: false) } catch { throw VaultError.wrap(error) }
        let suffix = "." + Self.metaExtension
        let ids = names.compactMap { name -> String? in
            guard name.hasSuffix(suffix) else { return nil }
            let id = String(name.dropLast(suffix.utf8.count))
            // Records are named by their item's canonical ID (upper-case UUID text); any other
            // name is a stray file, passed over like one (a record under another spelling of
            // its ID could never open: the ID is its associated data).
            return EntryName.isCanonicalID(id) ? id : nil
        }
        // Opening every record (read, decrypt, decode) is most of the time `vault list` and
        // the start of `create` take on a big vault: the records are split over the cores.
        var (found, damaged) = try openRecords(ids, in: metaDir)
        // A record under a key this process has not seen: another process rotated the keys
        // since this one loaded the key store. Read it again and retry those records.
        if !damaged.isEmpty, let before = try? openingKeyIDs(), keyStore.refreshCompartmentKeys(),
           let after = try? openingKeyIDs(), after != before {
            let retried = try openRecords(damaged, in: metaDir)
            found += retried.found
            damaged = retried.damaged
        }
        damaged.sort()
        found.sort { ($0.created, $0.id) < ($1.created, $1.id) }
        cachedItems = found
        cachedDamaged = damaged
        return found
    }

    private func openingKeyIDs() throws -> [[UInt8]] {
        try Compartment.allCases.flatMap { try keyStore.openingKeys(for: $0).map(CompartmentKeyRing.id(of:)) }
    }

    /// Opens the records of `ids` over up to four threads.
    private func openRecords(_ ids: [String], in metaDir: String) throws(VaultError) -> (found: [ItemMetadata], damaged: [String]) {
        // Each compartment's keys, the likeliest first, with their IDs worked out once.
        let keys: [(Compartment, SecureBytes, [UInt8])]
        do {
            keys = try Compartment.allCases.flatMap { compartment in
                try keyStore.openingKeys(for: compartment).map { (compartment, $0, try CompartmentKeyRing.id(of: $0)) }
            }
        } catch { throw VaultError.wrap(error) }
        let parts = max(1, min(ProcessInfo.processInfo.activeProcessorCount, 4, ids.count / 256))
        var results = [(found: [ItemMetadata], damaged: [String])](repeating: ([], []), count: parts)
        results.withUnsafeMutableBufferPointer { slots in
            let slots = UncheckedSendable(slots)
            let me = UncheckedSendable(self)
            let keys = UncheckedSendable(keys)
            DispatchQueue.concurrentPerform(iterations: parts) { part in
                let range = (ids.count * part / parts)..<(ids.count * (part + 1) / parts)
                slots.value[part] = me.value.openRecords(ids[range], in: metaDir, keys: keys.value)
            }
        }
        return (results.flatMap(\.found), results.flatMap(\.damaged))
    }

    /// Opens the records of `ids`; touches nothing shared but the read-only keys, so
    /// several run at once.
    private func openRecords(_ ids: ArraySlice<String>, in metaDir: String,
                             keys: [(Compartment, SecureBytes, [UInt8])]) -> (found: [ItemMetadata], damaged: [String]) {
        var found: [ItemMetadata] = []
        var damaged: [String] = []
        for id in ids {
            // A record that does not open is reported, not fatal: one damaged file must not
            // keep the user from every other item (or from removing or restoring that one).
            guard let sealed = try? FileDescriptor.openForReading(Path.join(metaDir, "\(id).\(Self.metaExtension)")).readAll(limit: 64 << 10),
                  let opened = keys.lazy.compactMap({ compartment, key, keyID -> ItemMetadata? in
                      guard var item = ItemMetadata.open(sealed, id: id, key: key), item.compartment == compartment else { return nil }
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
        try damagedItemIDs().map { .itemDamaged(id: $0, path: metadataPath(id: $0)) }
    }

    /// Removes whatever files an item with a damaged record has (metadata and either kind of
    /// content), in one journaled commit.
    public func removeDamaged(id: String) throws(VaultError) {
        precondition(lock != nil, "vault opened read-only")
        let staging = try VaultStaging(vault: self)
        staging.stageRemoval(paths: [relativeMetadataPath(id: id),
                                     ItemKind.photo.relativePath(id: id), ItemKind.note.relativePath(id: id)])
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
    public var isWritable: Bool { lock != nil }

    func forgetCachedItems() {
        cachedItems = nil
        cachedDamaged = []
    }

    func metadataPath(id: String) -> String { Path.join(path, relativeMetadataPath(id: id)) }
    func relativeMetadataPath(id: String) -> String { "\(Self.metaDirectory)/\(id).\(Self.metaExtension)" }

    // MARK: reading items

    /// The item's file, opened and given its cheap checks (see `SealedVaultItem`).
    public func sealedItem(_ item: ItemMetadata) throws(VaultError) -> SealedVaultItem {
        try SealedVaultItem(item, vaultPath: path, keyStore: keyStore)
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
        /// Opens the item's bytes; called only when the item is encrypted.
        public let open: () throws -> ByteSource
        public let kind: ItemKind
        public let name: String
        public let compartment: Compartment
        public let expires: Date?

        public init(opening open: @escaping () throws -> ByteSource, kind: ItemKind, name: String,
                    compartment: Compartment, expires: Date?) {
            self.open = open
            self.kind = kind
            self.name = name
            self.compartment = compartment
            self.expires = expires
        }

        public init(source: ByteSource, kind: ItemKind, name: String, compartment: Compartment, expires: Date?) {
            self.init(opening: { source }, kind: kind, name: name, compartment: compartment, expires: expires)
        }
    }

    /// Encrypts and stores items all at once: each is staged out of sight, and one journaled
    /// commit publishes them (see `VaultStaging`), so a failure or a kill adds none of them.
    /// `progress` counts the bytes read (its totals are the caller's to announce) and each
    /// item; `staged` follows each item as it is sealed, before the commit.
    public func add(_ items: [NewItem], now: Date = Date(), progress: VaultChangeProgress? = nil,
                    staged: (ItemMetadata) -> Void = { _ in }) throws(VaultError) -> [ItemMetadata] {
        precondition(lock != nil, "vault opened read-only")
        for new in items {
            try ItemMetadata.checkName(new.name)
            guard (new.compartment == .fade) == (new.expires != nil) else {
                throw .invalidCompartmentUse("fade items, and only they, have an expiry")
            }
        }
        let staging = try VaultStaging(vault: self)
        var added: [ItemMetadata] = []
        do {
            for new in items {
                let item = try staging.stage(id: UUID().uuidString, kind: new.kind, compartment: new.compartment,
                                             name: new.name, created: now, expires: new.expires, replaces: nil) { file, key in
                    let source = try new.open()
                    return try SealedVaultItem.sealNew(progress.map { ProgressCountingSource(source, progress: $0) } ?? source,
                                                       key: key, to: file)
                }
                progress?.itemDone()
                staged(item)
                added.append(item)
            }
        } catch {
            staging.discard()
            throw VaultError.wrap(error)
        }
        try staging.commit()
        progress?.finish()
        return added
    }

    public func add(_ new: NewItem, now: Date = Date()) throws(VaultError) -> ItemMetadata {
        let added = try add([new], now: now)
        return added[0]
    }

    /// Removes items all at once (one journaled commit): metadata first, then content.
    public func remove(_ items: [ItemMetadata]) throws(VaultError) {
        precondition(lock != nil, "vault opened read-only")
        let staging = try VaultStaging(vault: self)
        for item in items { staging.stageRemoval(item) }
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
