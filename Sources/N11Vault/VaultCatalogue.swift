import Glibc
import N11System

/// The vault's item records in one SQLite file, `Catalogue.sqlite` (FORMAT.md, Appendix A):
///
///     items(id TEXT PRIMARY KEY, record BLOB)   one row per item: the sealed metadata record,
///                                               byte for byte what v1 kept in Meta/{ID}.n11meta
///     pending(step INTEGER PRIMARY KEY, operation TEXT)
///                                               file steps of the last committed change not
///                                               yet carried out (`VaultStaging.Operation`)
///
/// SQLite in WAL mode with `synchronous=FULL`: a change is one transaction, durable when
/// COMMIT returns, and a reader sees a change whole or not at all. Without the keys only IDs
/// (and, from the content files, sizes) are visible: each record is sealed as before.
///
/// Seed 003 fixes where content files live, so a change that replaces or removes one cannot
/// happen inside the transaction: the transaction records those file steps as `pending`
/// rows, the writer carries them out after COMMIT and deletes the rows, and a killed writer's
/// rows are carried out by the next one. Readers take a pending move's source as the item's
/// file until it has moved (`Vault.contentPaths`).
final class VaultCatalogue {
    static let fileName = "Catalogue.sqlite"
    /// What SQLite keeps beside it while connections are open (WAL mode).
    static let companionSuffixes = ["-wal", "-shm", "-journal"]
    /// `PRAGMA application_id`: "N11V". A file without it is not a catalogue.
    static let applicationID: Int64 = 0x4E31_3156
    /// `PRAGMA user_version`: the catalogue's format. 2, after v1's Meta/ directory.
    static let formatVersion: Int64 = 2

    let path: String
    private let database: SQLiteDatabase
    /// Statements of a change, compiled on first use and reused for every item.
    private var statements: [String: SQLiteStatement] = [:]
    private var nextStep: Int64 = 1

    private init(path: String, database: SQLiteDatabase) {
        self.path = path
        self.database = database
    }

    /// Opens the vault's catalogue: `forWriting` (the vault lock held) or to read.
    static func open(in vaultPath: String, forWriting: Bool) throws -> VaultCatalogue {
        let path = Path.join(vaultPath, fileName)
        // Readers open it writable too: SQLite's shared-memory index of the WAL needs a
        // writable `-shm`. A vault on a read-only file system (a mounted snapshot, say) cannot
        // change while it is read (`openOnReadOnlyFileSystem`).
        do {
            let catalogue = VaultCatalogue(path: path, database: try SQLiteDatabase(path: path, access: .readWrite))
            try catalogue.checkFormat()
            if forWriting { try catalogue.database.execute("PRAGMA synchronous = FULL") }
            return catalogue
        } catch {
            guard !forWriting, FileSystem.isReadOnly(containing: vaultPath) else { throw error }
            return try openOnReadOnlyFileSystem(path)
        }
    }

    /// A catalogue that cannot change while it is read. Committed rows may still be only in
    /// `-wal` (a writer was killed, or the snapshot was taken while one was open): SQLite
    /// reads them through the `-shm` index beside it, read-only. Opened as immutable, SQLite
    /// ignores a WAL, so that is done only when there is none; a WAL without its index is
    /// refused rather than read as if its rows did not exist (FORMAT.md, Appendix A.1).
    private static func openOnReadOnlyFileSystem(_ path: String) throws -> VaultCatalogue {
        if let database = try? SQLiteDatabase(path: path, access: .readOnly) {
            let catalogue = VaultCatalogue(path: path, database: database)
            if (try? catalogue.checkFormat()) != nil { return catalogue }
        }
        if let wal = try FileStatus.of(path + "-wal"), wal.size > 0 {
            throw SystemError("committed changes wait in Catalogue.sqlite-wal, which SQLite cannot read on a read-only file system without its -shm file; copy the vault to a writable place and read it there",
                              path: path, errno: EROFS)
        }
        let catalogue = VaultCatalogue(path: path, database: try SQLiteDatabase(path: path, access: .immutable))
        try catalogue.checkFormat()
        return catalogue
    }

    /// Makes an empty catalogue at `path` (a temp name the caller renames into place) and
    /// returns it open for writing.
    static func create(at path: String) throws -> VaultCatalogue {
        // Made here as an empty 0600 file, whatever the umask: SQLite would make it 0644, and
        // gives its -wal and -shm files the main file's mode.
        try FileDescriptor.createExclusive(path, mode: 0o600).close()
        let database = try SQLiteDatabase(path: path, access: .readWrite)
        try database.execute("""
            PRAGMA journal_mode = WAL;
            PRAGMA synchronous = FULL;
            PRAGMA application_id = \(applicationID);
            PRAGMA user_version = \(formatVersion);
            CREATE TABLE items(id TEXT PRIMARY KEY NOT NULL, record BLOB NOT NULL) WITHOUT ROWID;
            CREATE TABLE pending(step INTEGER PRIMARY KEY, operation TEXT NOT NULL);
            """)
        return VaultCatalogue(path: path, database: database)
    }

    /// A new vault's empty catalogue: made under a temp name, whole in its main file, then
    /// renamed into place (a kill leaves a temp file, never a half-made catalogue).
    static func createEmpty(in vaultPath: String) throws {
        let temp = Path.join(vaultPath, AtomicFile.tempName(for: VaultCatalogue.fileName))
        do {
            try create(at: temp).checkpoint()   // closed when this statement ends
            try FileSystem.move(temp, to: Path.join(vaultPath, fileName), missingIsDone: false)
            try Directory.sync(vaultPath)
        } catch {
            VaultCatalogue.removeFiles(at: temp)
            throw error
        }
    }

    /// The catalogue and SQLite's files beside it.
    static var fileNames: [String] { [fileName] + companionSuffixes.map { fileName + $0 } }

    /// Removes the catalogue's files (an unfinished layout's, or a vault being taken back
    /// whose catalogue was checked empty); no connection to it may be open.
    static func removeFiles(in vaultPath: String) { removeFiles(at: Path.join(vaultPath, fileName)) }

    static func removeFiles(at path: String) {
        for suffix in [""] + companionSuffixes { try? FileSystem.removeFile(path + suffix) }
    }

    private func checkFormat() throws {
        guard try database.integer("PRAGMA application_id") == Self.applicationID else {
            throw VaultError.catalogueDamaged(path: path, reason: "not an n11archive catalogue")
        }
        guard let version = try database.integer("PRAGMA user_version"), version <= Self.formatVersion else {
            throw VaultError.catalogueTooNew(path: path)
        }
    }

    // MARK: reading

    /// What a reader needs, read in one transaction so that it is one state of the vault:
    /// every record (in batches of `batchSize`, to `body`) and the pending file steps.
    func read(batchSize: Int = 4096, _ body: ([(id: String, sealed: [UInt8])]) throws -> Void) throws -> [String] {
        try reading {
            let rows = try database.prepare("SELECT id, record FROM items")
            var batch: [(id: String, sealed: [UInt8])] = []
            batch.reserveCapacity(batchSize)
            while try rows.step() {
                batch.append((rows.text(0), rows.blob(1)))
                if batch.count == batchSize {
                    try body(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
            if !batch.isEmpty { try body(batch) }
            return try pendingOperations()
        }
    }

    /// Records in ID order from `start` on (every record when nil), in batches of
    /// `batchSize`, until `body` says to stop: one read transaction, one state of the vault,
    /// and memory for one batch whatever the vault's size (issue 34). IDs are canonical
    /// upper-case text, so SQLite's byte order on them is the manifest's ID order.
    /// `pending` gets the pending file steps of the same state first.
    func readInIDOrder(from start: String?, batchSize: Int = 1024, pending: ([String]) -> Void = { _ in },
                       _ body: ([(id: String, sealed: [UInt8])]) throws -> Bool) throws {
        try reading {
            pending(try pendingOperations())
            let rows = try database.prepare("SELECT id, record FROM items WHERE id >= ? ORDER BY id")
            try rows.bind(1, start ?? "")
            var batch: [(id: String, sealed: [UInt8])] = []
            batch.reserveCapacity(batchSize)
            while try rows.step() {
                batch.append((rows.text(0), rows.blob(1)))
                if batch.count == batchSize {
                    guard try body(batch) else { return }
                    batch.removeAll(keepingCapacity: true)
                }
            }
            if !batch.isEmpty { _ = try body(batch) }
        }
    }

    /// Statements compiled on the catalogue's connection so far (for the tests).
    var statementsPrepared: Int { database.statementsPrepared }

    /// One record, or nil if no row has `id`.
    func record(id: String) throws -> [UInt8]? {
        let statement = try prepared("SELECT record FROM items WHERE id = ?1")
        defer { statement.reset() }
        try statement.bind(1, id)
        guard try statement.step() else { return nil }
        return statement.blob(0)
    }

    /// Whether a row has `id` (its record is not read).
    func contains(id: String) throws -> Bool {
        let statement = try prepared("SELECT 1 FROM items WHERE id = ?1")
        defer { statement.reset() }
        try statement.bind(1, id)
        return try statement.step()
    }

    /// Runs `body` in one read transaction (one state of the catalogue, and SQLite's lock
    /// taken once, not per statement), unless one is open already.
    func reading<T>(_ body: () throws -> T) throws -> T {
        let inTransaction = database.inTransaction
        if !inTransaction { try database.execute("BEGIN") }
        defer {
            // Never left open: a change begun after it would fail as a nested transaction.
            if !inTransaction, (try? database.execute("COMMIT")) == nil, database.inTransaction {
                try? database.execute("ROLLBACK")
            }
        }
        return try body()
    }

    /// The pending file steps, in order.
    func pendingOperations() throws -> [String] {
        let rows = try database.prepare("SELECT operation FROM pending ORDER BY step")
        var lines: [String] = []
        while try rows.step() { lines.append(rows.text(0)) }
        return lines
    }

    /// Starts reading the file into the page cache beside a pass that will look up every row
    /// (`CatalogueWarmer`): B-tree pages are otherwise read one at a time, in no order.
    func warmCache() -> CatalogueWarmer? { CatalogueWarmer.start(path) }

    func count() throws -> Int64 { try database.integer("SELECT count(*) FROM items") ?? 0 }

    // MARK: one change

    /// The page cache of a change's connection (see `beginChange`).
    static let changeCacheBytes = 16 << 20

    /// The database's size in bytes, as this connection sees it (a change's own pages included).
    func byteCount() throws -> Int64 {
        (try database.integer("PRAGMA page_count") ?? 0) * (try database.integer("PRAGMA page_size") ?? 0)
    }

    /// Starts a change: the write lock of the file, taken at once (the vault lock already
    /// keeps other writers out). Nothing it does is visible until `commitChange`.
    func beginChange() throws {
        // A change touches a leaf page per new row, at random (IDs are random): with SQLite's
        // default 2 MiB page cache, adding to a 100,000-item vault re-read about five pages
        // per item. 16 MiB holds the B-tree's inner pages of 3,000,000 notes (about 11 MB)
        // and the whole tree of 40,000; past that, new rows are held back and put in in ID
        // order (`VaultStaging`), which needs the inner pages and one leaf at a time. It was
        // 32 MiB, which a 100,000-note add did not yet fill and a larger one did: `vault add`
        // peaked at 73 MiB for 100,000 notes and 81 MiB for 300,000 and 1,000,000 (1.12x in
        // the scale run); with 16 MiB, 64-65 MiB for all three, no slower (BENCHMARKS.md).
        // Set here, not when the writer opens: `create` holds the lock but only reads, in ID
        // order, and a full cache would grow its memory with the vault (issue 34).
        try database.execute("PRAGMA cache_size = -\(Self.changeCacheBytes >> 10); BEGIN IMMEDIATE")
        nextStep = (try database.integer("SELECT coalesce(max(step), 0) + 1 FROM pending")) ?? 1
    }

    func put(id: String, record: [UInt8]) throws {
        let statement = try prepared("INSERT OR REPLACE INTO items(id, record) VALUES(?1, ?2)")
        try statement.bind(1, id)
        try statement.bind(2, blob: record)
        try statement.step()
    }

    func delete(id: String) throws {
        let statement = try prepared("DELETE FROM items WHERE id = ?1")
        try statement.bind(1, id)
        try statement.step()
    }

    /// Adds a file step to carry out after the commit; `first` puts it before every other
    /// (a key rotation's promotion).
    func addPending(_ operation: String, first: Bool = false) throws {
        let statement = try prepared("INSERT INTO pending(step, operation) VALUES(?1, ?2)")
        try statement.bind(1, first ? 0 : nextStep)
        try statement.bind(2, operation)
        try statement.step()
        if !first { nextStep += 1 }
    }

    private func prepared(_ sql: String) throws -> SQLiteStatement {
        if let statement = statements[sql] { return statement }
        let statement = try database.prepare(sql)
        statements[sql] = statement
        return statement
    }

    /// The commit point of a vault change: durable when this returns.
    func commitChange() throws { try database.execute("COMMIT") }

    /// Copies everything into the main file and empties the WAL, so that the main file alone
    /// is the whole catalogue (before a new one is renamed into place).
    func checkpoint() throws {
        let result = try database.prepare("PRAGMA wal_checkpoint(TRUNCATE)")
        guard try result.step(), result.int64(0) == 0 else {
            throw SystemError("cannot checkpoint the catalogue", path: path, errno: EBUSY)
        }
        result.reset()
    }

    func rollbackChange() {
        if database.inTransaction { try? database.execute("ROLLBACK") }
    }

    /// After the pending steps have been carried out (and their directories synced).
    /// Not synced on its own: if it is lost, the steps run again, and each is idempotent.
    func clearPending() throws {
        try database.execute("PRAGMA synchronous = NORMAL; DELETE FROM pending; PRAGMA synchronous = FULL")
    }
}

/// Reads the catalogue's file into the page cache from start to end on a thread of its own,
/// beside a pass that will look up every row in another order. `vault verify` looks the
/// records up in the order of the content files' inodes: from a cold cache each B-tree page
/// was a disk read waited for alone (3,000,000 notes, a 1.2 GB catalogue), where one
/// sequential sweep reads the whole file in about 3 s. The thread has a connection of its
/// own and reads through SQLite's handle of the file (`SQLiteDatabase.readFileBytes`), never
/// a descriptor of its own, whose closing would drop SQLite's locks. A file larger than a
/// quarter of the machine's memory is left alone: its first pages would be pushed out by
/// its last before the pass came to them. The bytes are dropped as read (one 1 MiB buffer).
final class CatalogueWarmer {
    static let window = 1 << 20
    private let thread: BackgroundThread

    private init(_ thread: BackgroundThread) { self.thread = thread }

    /// Starts the sweep, or returns nil when there is nothing worth doing: no file, an empty
    /// or too large one, or no thread to be had.
    static func start(_ path: String) -> CatalogueWarmer? {
        guard let status = try? FileStatus.of(path), status.kind == .regular, status.size > 0,
              status.size <= Int64(MachineMemory.physicalBytes / 4),
              let database = try? SQLiteDatabase(path: path, access: .readOnly) else { return nil }
        return BackgroundThread { stopped in
            var buffer = [UInt8](repeating: 0, count: window)
            var offset: Int64 = 0
            while !stopped(), buffer.withUnsafeMutableBytes({ database.readFileBytes(into: $0, at: offset) }) {
                offset += Int64(window)
            }
        }.map(CatalogueWarmer.init)
    }

    /// Tells the sweep to stop and waits for it.
    func stop() { thread.stop() }

    /// Waits for the sweep to end by itself (for tests).
    func wait() { thread.wait() }
}
