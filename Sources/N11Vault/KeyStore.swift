import Glibc
import N11Crypto
import N11Format
import N11System

/// The Linux counterpart of the iOS Keychain: one file, `keystore.n11keys` (0600) in the
/// private home directory (0700), holding the compartment keys and the per-archive device
/// keys of secure archives. Keys are held in locked memory and never leave this file.
///
/// File layout (little-endian):
///
///     "N11KEYS\0"  version:u8 (1; 2 once keys were rotated)  protection:u8 (0 none, 1 or 2 PIN)
///     protection 2: ops:u32  memoryKiB:u32  salt[16]  then nonce[12] ‖ body ciphertext ‖ tag[16]
///                   ‖ SHA-256(every byte before it)[32]   (damage is told from a wrong PIN)
///                   (ChaCha20-Poly1305 under Argon2id(PIN), associated data = every byte before the nonce)
///     protection 1: as 2 without the checksum (written before; still read)
///     protection 0: body  SHA-256(every byte before it)[32]   (catches damage; not a secret)
///     body: storeID[16]  count:u32  count × (kind:u8  id[16]  key[32])
///     version: 1, or 2 when the file holds kind 6…14, or 3 when it holds kind 15 or 16
///
/// kind 1/2/3 are the vault/fade/backup compartment keys (id all zero), kind 4 an archive key
/// (id = archive ID), 5 an identity; version 2 adds each compartment's history (6…14:
/// retired, pending and forgotten keys, id = the key's ID; see `CompartmentKeyRing`);
/// version 3 adds the home's Ed25519 signing key (15, its seed) and, in backups only, the
/// home's trusted signers (16, public keys).
/// Writers hold the home's lock (`.lock`) and re-read the file before saving, so two
/// processes adding archive keys (or one rotating keys) never lose what the other saved.
public final class KeyStore: @unchecked Sendable {
    public static let maximumFileSize = 64 << 20

    public let path: String
    let home: N11Home
    public let storeID: [UInt8]
    private var compartmentKeys: CompartmentKeys
    private var archiveRecords: [Record]
    /// P-256 private keys that open archives made for their public keys (`key generate`,
    /// `key import`), oldest first.
    public private(set) var identities: [P256PrivateKey]
    /// The Ed25519 key that signs this home's archives (`key generate --signing`, `init`).
    public private(set) var signingKey: Ed25519SigningKey?
    /// A backup's trusted signers (`key backup` carries them; the home keeps its list in
    /// `TrustedSigners`' file, readable without the PIN). Empty for a home's own key store.
    public internal(set) var trustedSignersInBackup: [Ed25519PublicKey] = []
    private var sealing: Sealing?

    public var isPINProtected: Bool { sealing != nil }
    /// Whether `create` made this file (and the home directory): only then may a failed
    /// command take them back (`removeIfUnused`).
    private var createdFile = false
    private var createdHome = false
    /// The home's lock, kept by a store made with `create(holdingLock: true)`.
    private var heldLock: FileLock?

    /// Lets other processes load this key store again (see `create(holdingLock:)`).
    public func releaseHomeLock() { heldLock = nil }

    init(home: N11Home, storeID: [UInt8], compartmentKeys: CompartmentKeys, archiveRecords: [Record],
         identities: [P256PrivateKey] = [], signingKey: Ed25519SigningKey? = nil, sealing: Sealing?) {
        self.home = home
        self.path = home.keyStorePath
        self.storeID = storeID
        self.compartmentKeys = compartmentKeys
        self.archiveRecords = archiveRecords
        self.identities = identities
        self.signingKey = signingKey
        self.sealing = sealing
    }

    // MARK: creating and loading

    /// Creates the home directory (0700) and a new key store with fresh vault, fade and backup
    /// keys, sealed under `pin` if one is given. Refuses to replace an existing key store.
    ///
    /// With `holdingLock` the new store keeps the home's lock until `releaseHomeLock()` (or
    /// until it goes away): no other process can load it meanwhile, so a command that fails
    /// can take it back (`removeIfUnused`) knowing nobody has used its keys. Loading a key
    /// store in the same process meanwhile would wait for that lock: pass the store along.
    ///
    /// With `signing` it also holds a new Ed25519 signing key (`init`: a home signs its
    /// archives from the start, DESIGN.md §8.4).
    public static func create(in home: N11Home, pin: SecureBytes?, holdingLock: Bool = false,
                              signing: Bool = false) throws(VaultError) -> KeyStore {
        if let pin { try checkPIN(pin) }
        return try create(in: home, pin: pin, sealedWith: pinParameters, holdingLock: holdingLock, signing: signing)
    }

    /// The Argon2id cost of sealing a new key store under a PIN: the moderate profile
    /// (256 MiB, 3 passes, about a second), the same as a portable archive's password. Stores
    /// sealed by earlier versions with the interactive profile still open.
    public static let pinParameters = Argon2Parameters.moderate

    /// `create` with a chosen sealing cost and no PIN rule (tests make stores as earlier
    /// versions did).
    static func create(in home: N11Home, pin: SecureBytes?, sealedWith parameters: Argon2Parameters,
                       holdingLock: Bool = false, signing: Bool = false) throws(VaultError) -> KeyStore {
        let (lock, createdHome) = try prepareHome(home)
        // Released on the way out, unless the new store keeps holding it (`holdingLock`).
        var keepLock = false
        defer { if !keepLock { lock.release() } }
        do {
            var rings: [Compartment: CompartmentKeyRing] = [:]
            for compartment in Compartment.allCases { rings[compartment] = CompartmentKeyRing(current: try SecureBytes(randomCount: 32)) }
            let keys = CompartmentKeys(rings: rings)
            var sealing: Sealing? = nil
            if let pin {
                let salt = SecureRandom.bytes(Argon2id.saltLength)
                let key = try Argon2id.deriveKey(password: pin, salt: salt, parameters: parameters)
                sealing = Sealing(parameters: parameters, salt: salt, key: key)
            }
            let store = KeyStore(home: home, storeID: SecureRandom.bytes(16), compartmentKeys: keys, archiveRecords: [],
                                 signingKey: signing ? try Ed25519SigningKey.generate() : nil, sealing: sealing)
            try store.save(replaceExisting: false)
            store.createdHome = createdHome
            store.createdFile = true
            if holdingLock {
                store.heldLock = lock
                keepLock = true
            }
            return store
        } catch { throw VaultError.wrap(error) }
    }

    /// Makes the home directory (0700) if needed, checks it, and takes its lock; refuses a
    /// home that already has a key store. Returns the lock and whether the home was made.
    private static func prepareHome(_ home: N11Home) throws(VaultError) -> (FileLock, Bool) {
        let lock: FileLock
        let createdHome: Bool
        do {
            createdHome = try Directory.ensure(home.root, mode: 0o700)
            do {
                try PrivatePermissions.checkDirectory(home.root)
                // A key store that could not be loaded afterwards is not made at all.
                try PrivatePermissions.checkAncestors(of: home.root)
            } catch {
                if createdHome { _ = try? DirectoryHandle.open(Path.directory(of: home.root), followingLink: true)
                    .removeEmptySubdirectory(Path.lastComponent(of: home.root)) }
                throw error
            }
            lock = try lockHome(home, wait: 60)
        } catch { throw VaultError.wrap(error) }
        if (try? FileStatus.of(home.keyStorePath)) != nil {
            lock.release()
            throw .alreadyInitialized(path: home.keyStorePath)
        }
        return (lock, createdHome)
    }

    /// Loads the key store of `home`. `pin` is asked for only if the file is sealed.
    public static func load(from home: N11Home, pin: () throws -> SecureBytes?) throws(VaultError) -> KeyStore {
        do {
            let contents = try readSharingLock(of: home)
            return try parse(contents, home: home) { parameters, salt in
                guard let pin = try pin() else { throw VaultError.keyStoreLocked(path: home.keyStorePath) }
                return try Argon2id.deriveKey(password: pin, salt: salt, parameters: parameters)
            }
        } catch { throw VaultError.wrap(error) }
    }

    /// How long a reader waits for a writer of the key store: writers hold the home's lock
    /// for milliseconds, except a restore that made a new key store, for its whole run.
    static let readerLockWait = 10.0

    /// `readFile` under a shared hold of the home's lock, so a key store that a running
    /// command made and may still take back (`create(holdingLock:)`) is never read. A home
    /// where the lock file cannot be made (read-only media) is read without it: nothing can
    /// write there either.
    static func readSharingLock(of home: N11Home) throws -> SecureBytes {
        guard (try? FileStatus.of(home.keyStorePath)) ?? nil != nil else { return try readFile(of: home) }
        // Nothing is created in a home that fails the checks (readFile repeats them).
        do { try PrivatePermissions.checkDirectory(home.root) } catch { throw VaultError.wrap(error) }
        let lock: FileLock?
        do {
            switch try FileLock.acquire(home.lockPath, shared: true, waitSeconds: readerLockWait) {
            case .acquired(let held): lock = held
            case .heldBy(let pid): throw VaultError.busy(lock: home.lockPath, holder: pid)
            }
        } catch let error as SystemError where error.isPermissionDenied {
            lock = nil
        }
        return try FileLock.withLock(lock) { try readFile(of: home) }
    }

    /// The file's bytes in locked memory, after the permission checks.
    private static func readFile(of home: N11Home) throws -> SecureBytes {
        let path = home.keyStorePath
        guard (try? FileStatus.of(home.root, followLinks: true)) != nil,
              (try? FileStatus.of(path)) != nil else { throw VaultError.notInitialized(home: home.root) }
        let fd: FileDescriptor
        do {
            // By path first, for messages that name the fix; then on what was opened, without
            // following a link, so nothing swapped in between the check and the open passes.
            try PrivatePermissions.checkDirectory(home.root)
            try PrivatePermissions.checkFile(path)
            try PrivatePermissions.checkAncestors(of: home.root)
            let directory = try DirectoryHandle.open(home.root)
            try PrivatePermissions.checkDirectory(directory)
            fd = try directory.openFileForReading(Path.lastComponent(of: path))
            try PrivatePermissions.checkFile(fd)
        } catch { throw VaultError.wrap(error) }

        let contents: SecureBytes
        do {
            // Size the locked buffer from the file, not from the maximum: locked memory is
            // scarce (RLIMIT_MEMLOCK) and counts against the process's footprint.
            let size = Int(min(try fd.status().size, Int64(maximumFileSize)))
            contents = try SecureBytes.readContents(of: fd, limit: size)
        } catch let error as CryptoError {
            throw VaultError.keyStoreDamaged(path: path, reason: error.description)
        } catch { throw VaultError.wrap(error) }
        return contents
    }

    // MARK: keys

    /// The compartment's current key: the only one that seals anything.
    public func key(for compartment: Compartment) -> SecureBytes {
        compartmentKeys[compartment].current
    }

    /// The device key of a secure archive, if this key store made that archive.
    public func archiveKey(id: [UInt8]) -> SecureBytes? {
        archiveRecords.first { $0.id == id }?.key
    }

    /// Stores a new archive key and saves the file atomically. Under the home's lock the file
    /// is read again and the key added to what it holds now, so keys that another process
    /// added since this one loaded are kept.
    public func addArchiveKey(id: [UInt8], key: SecureBytes, lockWait: Double = 60) throws(VaultError) {
        precondition(id.count == 16 && key.count == 32)
        do {
            let lock = heldLock == nil ? try Self.lockHome(home, wait: lockWait) : nil
            try FileLock.withLock(lock) {
                try reloadLocked()
                guard archiveKey(id: id) == nil else { return }
                archiveRecords.append(Record(kind: .archive, id: id, key: key))
                try save(replaceExisting: true)
            }
        } catch { throw VaultError.wrap(error) }
    }

    /// Adds a P-256 identity (the same way as `addArchiveKey`). Returns false, changing
    /// nothing, if the store already holds that key.
    @discardableResult
    public func addIdentity(_ key: P256PrivateKey, lockWait: Double = 60) throws(VaultError) -> Bool {
        do {
            let lock = heldLock == nil ? try Self.lockHome(home, wait: lockWait) : nil
            return try FileLock.withLock(lock) {
                try reloadLocked()
                guard !identities.contains(where: { $0.publicKey == key.publicKey }) else { return false }
                identities.append(key)
                try save(replaceExisting: true)
                return true
            }
        } catch { throw VaultError.wrap(error) }
    }

    /// Adds the home's signing key (the same way as `addArchiveKey`). Returns the signing
    /// key the store holds afterwards: `key`, or the one it held already (a home signs with
    /// one key; its trusted signers may be several).
    @discardableResult
    public func addSigningKey(_ key: Ed25519SigningKey, lockWait: Double = 60) throws(VaultError) -> Ed25519SigningKey {
        do {
            let lock = heldLock == nil ? try Self.lockHome(home, wait: lockWait) : nil
            return try FileLock.withLock(lock) {
                try reloadLocked()
                if let signingKey { return signingKey }
                signingKey = key
                try save(replaceExisting: true)
                return key
            }
        } catch { throw VaultError.wrap(error) }
    }

    /// Takes in what the file holds now (with the home's lock held): records another
    /// process added since this one loaded are kept when this one saves.
    private func reloadLocked() throws {
        let current = try reread(try Self.readFile(of: home))
        guard current.storeID == storeID else {
            throw VaultError.keyStoreDamaged(path: path, reason: "it was replaced by another key store")
        }
        // Compartment keys too: another process may have rotated them since this one loaded.
        compartmentKeys = current.compartmentKeys
        archiveRecords = current.archiveRecords
        identities = current.identities
        signingKey = current.signingKey
    }

    /// The file's contents parsed with the key this process already derived from the PIN
    /// (no new prompt); a file sealed since under another PIN is refused.
    private func reread(_ contents: SecureBytes) throws -> KeyStore {
        try Self.parse(contents, home: home) { parameters, salt in
            guard let sealing, sealing.parameters == parameters, sealing.salt == salt else {
                throw VaultError.keyStoreDamaged(path: path, reason: "it was re-sealed by another process")
            }
            return sealing.key
        }
    }

    public var archiveKeyCount: Int { archiveRecords.count }

    // MARK: compartment keys over rotations

    /// Every key that may open the compartment's files and records, the likeliest first
    /// (see `CompartmentKeyRing.openingKeys`).
    public func openingKeys(for compartment: Compartment) -> [SecureBytes] {
        compartmentKeys[compartment].openingKeys
    }

    /// The ID (`CompartmentKeyRing.id(of:)`) of the compartment's current key.
    public func currentKeyID(for compartment: Compartment) throws(VaultError) -> [UInt8] {
        do { return try CompartmentKeyRing.id(of: key(for: compartment)) } catch { throw VaultError.wrap(error) }
    }

    /// The compartment key named `id`, current or retired, to open what it sealed; `nil`
    /// names the compartment's first key (secure archives written before key IDs existed,
    /// when no rotation had happened yet).
    public func key(for compartment: Compartment, id: [UInt8]?) throws(VaultError) -> SecureBytes {
        let ring = compartmentKeys[compartment]
        do {
            let wanted = try id ?? ring.originalID()
            if let key = try ring.key(id: wanted) { return key }
            if ring.forgotten.contains(wanted) { throw VaultError.compartmentKeyForgotten(compartment: compartment, keyStore: path) }
            throw VaultError.compartmentKeyUnknown(compartment: compartment, keyStore: path)
        } catch { throw VaultError.wrap(error) }
    }

    /// What `key list` shows of a compartment's keys: IDs only.
    public struct CompartmentKeyHistory: Sendable {
        public let compartment: Compartment
        public let current: [UInt8]
        public let retired: [[UInt8]]
        public let pending: [UInt8]?
        public let forgotten: [[UInt8]]
    }

    public func keyHistory() throws(VaultError) -> [CompartmentKeyHistory] {
        do {
            return try Compartment.allCases.map { compartment in
                let ring = compartmentKeys[compartment]
                return CompartmentKeyHistory(compartment: compartment, current: try CompartmentKeyRing.id(of: ring.current),
                                             retired: try ring.retired.map(CompartmentKeyRing.id(of:)),
                                             pending: try ring.pending.map(CompartmentKeyRing.id(of:)), forgotten: ring.forgotten)
            }
        } catch { throw VaultError.wrap(error) }
    }

    /// A rotation's first step: a new pending key for each of `compartments`, saved (durably)
    /// before anything is sealed under it. Pending keys of a rotation that never committed
    /// are dropped (the caller holds the vault lock and has finished any committed rotation,
    /// so nothing visible uses them). Returns the new keys.
    func beginRotation(of compartments: Set<Compartment>, lockWait: Double = 60) throws(VaultError) -> [Compartment: SecureBytes] {
        do {
            let lock = heldLock == nil ? try Self.lockHome(home, wait: lockWait) : nil
            return try FileLock.withLock(lock) {
                try reloadLocked()
                var made: [Compartment: SecureBytes] = [:]
                for compartment in Compartment.allCases {
                    let key: SecureBytes? = compartments.contains(compartment) ? try SecureBytes(randomCount: 32) : nil
                    compartmentKeys[compartment].pending = key
                    made[compartment] = key
                }
                try save(replaceExisting: true)
                return made
            }
        } catch { throw VaultError.wrap(error) }
    }

    /// A committed rotation's key change (a step of its journal, so also replayed after a
    /// crash): each pending key named in `ids` becomes current and the current one retired.
    /// A key that is already current is left alone, so a replay changes nothing.
    func promote(_ ids: [Compartment: [UInt8]], lockWait: Double = 60) throws {
        let lock = heldLock == nil ? try Self.lockHome(home, wait: lockWait) : nil
        try FileLock.withLock(lock) {
            try reloadLocked()
            var changed = false
            for (compartment, id) in ids {
                var ring = compartmentKeys[compartment]
                if try CompartmentKeyRing.id(of: ring.current) == id { continue }
                guard let pending = ring.pending, try CompartmentKeyRing.id(of: pending) == id else {
                    throw VaultError.keyStoreDamaged(path: path, reason: "it lacks the new \(compartment.rawValue) key of a committed key rotation")
                }
                ring.retired.append(ring.current)
                ring.current = pending
                ring.pending = nil
                compartmentKeys[compartment] = ring
                changed = true
            }
            if changed { try save(replaceExisting: true) }
        }
    }

    /// Forgets the retired keys of `compartments` (`vault rotate-keys --forget-retired`):
    /// only their IDs stay, so that a secure archive that needed one is told why it cannot
    /// be restored. Returns how many keys were forgotten.
    @discardableResult
    public func forgetRetiredKeys(of compartments: Set<Compartment>, lockWait: Double = 60) throws(VaultError) -> Int {
        do {
            let lock = heldLock == nil ? try Self.lockHome(home, wait: lockWait) : nil
            return try FileLock.withLock(lock) {
                try reloadLocked()
                var count = 0
                for compartment in compartments {
                    var ring = compartmentKeys[compartment]
                    count += ring.retired.count
                    ring.forgotten += try ring.retired.map(CompartmentKeyRing.id(of:))
                    ring.retired = []
                    compartmentKeys[compartment] = ring
                }
                if count > 0 { try save(replaceExisting: true) }
                return count
            }
        } catch { throw VaultError.wrap(error) }
    }

    /// Reads the file again (sharing the home's lock) and takes in its compartment keys: a
    /// reader that loaded the store before another process rotated finds the new keys.
    /// False if the file could not be read (the caller keeps what it had).
    func refreshCompartmentKeys() -> Bool {
        // Holding the home's lock, this process is the only writer: nothing to take in
        // (and a shared hold would wait for this process's own lock).
        guard heldLock == nil, let contents = try? Self.readSharingLock(of: home),
              let current = try? reread(contents), current.storeID == storeID else { return false }
        compartmentKeys = current.compartmentKeys
        return true
    }

    // MARK: PIN and backups

    /// Seals the key store under a new PIN, or (`nil`) removes its PIN, and saves it
    /// atomically. The caller has already opened it (with the current PIN, if any).
    public func changePIN(to pin: SecureBytes?, lockWait: Double = 60) throws(VaultError) {
        if let pin { try Self.checkPIN(pin) }
        do {
            let newSealing = try pin.map { pin in
                let salt = SecureRandom.bytes(Argon2id.saltLength)
                return Sealing(parameters: Self.pinParameters, salt: salt,
                               key: try Argon2id.deriveKey(password: pin, salt: salt, parameters: Self.pinParameters))
            }
            let lock = heldLock == nil ? try Self.lockHome(home, wait: lockWait) : nil
            try FileLock.withLock(lock) {
                try reloadLocked()
                sealing = newSealing
                try save(replaceExisting: true)
            }
        } catch { throw VaultError.wrap(error) }
    }

    /// Writes every key (compartment keys, device keys of secure archives, identities, the
    /// signing key) and the home's `trustedSigners` to a new file `path` (0600, never
    /// replacing one), sealed under `passphrase` the way a PIN seals the key store itself
    /// (Argon2id, 256 MiB, 3 passes; ChaCha20-Poly1305).
    public func writeBackup(to path: String, passphrase: SecureBytes, trustedSigners: [Ed25519PublicKey] = [],
                            lockWait: Double = 60) throws(VaultError) {
        do {
            if try FileStatus.of(path) != nil { throw VaultError.outputExists(path: path) }
            let lock = heldLock == nil ? try Self.lockHome(home, wait: lockWait) : nil
            try FileLock.withLock(lock) { try reloadLocked() }
            let salt = SecureRandom.bytes(Argon2id.saltLength)
            let sealed = Sealing(parameters: Self.pinParameters, salt: salt,
                                 key: try Argon2id.deriveKey(password: passphrase, salt: salt, parameters: Self.pinParameters))
            let file = try AtomicFile(path: path, mode: 0o600)
            let trust = try trustedSigners.map { key in
                Record(kind: .trustedSigner, id: try Self.signerID(key), key: try SecureBytes(copying: key.bytes))
            }
            try Self.write(storeID: storeID, records: try allRecords() + trust, sealing: sealed, to: file.descriptor)
            do { try file.commit(replaceExisting: false) }
            catch let error as SystemError where error.errno == EEXIST { throw VaultError.outputExists(path: path) }
        } catch { throw VaultError.wrap(error) }
    }

    /// Makes `home`'s key store from a backup: every key as it was, sealed under `pin` (or
    /// none). Refuses to replace a key store that exists.
    public static func restoreBackup(from path: String, passphrase: SecureBytes, into home: N11Home,
                                     pin: SecureBytes?) throws(VaultError) -> KeyStore {
        if let pin { try checkPIN(pin) }
        do {
            let fd: FileDescriptor
            do { fd = try FileDescriptor.openForReading(path) }
            catch let error as SystemError where error.errno == ENOENT { throw VaultError.inputMissing(path: path) }
            let contents = try SecureBytes.readContents(of: fd, limit: maximumFileSize)
            let backupHome = N11Home(root: Path.directory(of: Path.absolute(path)))
            let backup: KeyStore
            do {
                backup = try parse(contents, home: backupHome, backup: true) { parameters, salt in
                    try Argon2id.deriveKey(password: passphrase, salt: salt, parameters: parameters)
                }
            } catch VaultError.wrongPIN { throw VaultError.wrongBackupPassphrase(path: path) }
            catch VaultError.keyStoreDamaged(_, let reason) { throw VaultError.keyStoreDamaged(path: path, reason: reason) }
            // The new store: in a home prepared as `create` does (0700, locked, none there yet),
            // written once, complete, with the backup's keys and ID.
            let (lock, _) = try prepareHome(home)
            defer { lock.release() }
            var sealing: Sealing? = nil
            if let pin {
                let salt = SecureRandom.bytes(Argon2id.saltLength)
                sealing = Sealing(parameters: pinParameters, salt: salt,
                                  key: try Argon2id.deriveKey(password: pin, salt: salt, parameters: pinParameters))
            }
            let restored = KeyStore(home: home, storeID: backup.storeID, compartmentKeys: backup.compartmentKeys,
                                    archiveRecords: backup.archiveRecords, identities: backup.identities,
                                    signingKey: backup.signingKey, sealing: sealing)
            try restored.save(replaceExisting: false)
            restored.trustedSignersInBackup = backup.trustedSignersInBackup
            return restored
        } catch { throw VaultError.wrap(error) }
    }

    private func allRecords() throws -> [Record] {
        try compartmentKeys.records() + archiveRecords + (try identities.map { key in
            Record(kind: .identity, id: try Self.identityID(key.publicKey), key: key.scalar)
        }) + (try signingKey.map { key in [Record(kind: .signing, id: try Self.signerID(key.publicKey), key: try key.seed())] } ?? [])
    }

    /// Takes back a key store that `create` made in this process, for a command that failed
    /// before anything was kept under its keys (a restore onto a new machine). Decided under
    /// the home's lock — held since `create(holdingLock: true)`, so no other process has
    /// loaded it — and only if the file is still this store and holds no archive key; then
    /// the home directory too if `create` made it and nothing else is in it. Never a recursive
    /// removal. Returns whether the key store is gone.
    @discardableResult
    public func removeIfUnused() -> Bool {
        guard createdFile else { return false }
        let lock = heldLock ?? (try? Self.lockHome(home, wait: 5))
        guard lock != nil else { return false }
        defer {
            lock?.release()
            heldLock = nil
        }
        guard let current = try? reread(try Self.readFile(of: home)),
              current.storeID == storeID, current.archiveKeyCount == 0, current.identities.isEmpty else { return false }
        guard (try? Directory.removeFile(path)) != nil else { return false }
        createdFile = false
        if createdHome, let parent = try? DirectoryHandle.open(Path.directory(of: home.root), followingLink: true),
           let root = try? parent.openSubdirectory(Path.lastComponent(of: home.root)) {
            try? root.removeFile(Path.lastComponent(of: home.lockPath))
            try? parent.removeEmptySubdirectory(Path.lastComponent(of: home.root))
        }
        return true
    }

    // MARK: saving

    private func save(replaceExisting: Bool) throws {
        let file = try AtomicFile(path: path, mode: 0o600)
        try Self.write(storeID: storeID, records: try allRecords(), sealing: sealing, to: file.descriptor)
        try file.commit(replaceExisting: replaceExisting)
    }

    /// Takes the home's lock, which every writer of the key store holds, and removes the temp
    /// files a killed writer left (safe only under the lock: no other writer is running).
    private static func lockHome(_ home: N11Home, wait: Double) throws -> FileLock {
        switch try FileLock.acquire(home.lockPath, waitSeconds: wait) {
        case .acquired(let lock):
            AtomicFile.removeLeftovers(in: home.root)
            return lock
        case .heldBy(let pid):
            throw VaultError.busy(lock: home.lockPath, holder: pid)
        }
    }

    /// The shortest PIN a new key store takes. A copied key store can be attacked offline
    /// at one Argon2id per guess and no retry limit: 4 digits fell in 29 minutes on one core
    /// with the old interactive cost; 8 digits at the moderate cost take years per core.
    public static let minimumPINLength = 8

    public static func checkPIN(_ pin: SecureBytes) throws(VaultError) {
        let rule = "a PIN must have at least \(minimumPINLength) characters, not all the same: it is all that protects a copied key store (see README)"
        guard pin.count >= minimumPINLength else { throw .pinRejected(rule) }
        let allSame = pin.withUnsafeBytes { raw in raw.allSatisfy { $0 == raw[0] } }
        guard !allSame else { throw .pinRejected(rule) }
    }
}
