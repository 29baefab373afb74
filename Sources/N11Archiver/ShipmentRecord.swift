import Foundation
import N11Format
import N11System
import N11Vault

/// What this home has shipped to each destination (a directory or remote directory), so
/// that the next night's archive can be incremental (DESIGN.md §8.3): for every item of the
/// last archive's manifest, the archive that holds its bytes there and where; and those
/// archives' names and sizes, to check they are still there. `HOME/shipped.sqlite` (0600),
/// replaced per destination in one transaction after an archive is published, so a run that
/// dies leaves the record of the night before. A record that is missing, does not read, or
/// names an archive no longer there makes the next archive a full one: never a broken one.
public final class ShipmentRecord {
    public static let fileName = "shipped.sqlite"
    /// Appended to a destination's mode: its page rows are its last manifest's.
    static let pagesMarker = ";pages"

    public struct Item: Sendable, Equatable {
        /// The archive (hex ID) whose pack holds the bytes.
        public let archive: String
        public let sha256: String
        public let size: Int64
        public let pack: Int64
        public let offset: Int64

        public init(archive: String, sha256: String, size: Int64, pack: Int64, offset: Int64) {
            self.archive = archive; self.sha256 = sha256; self.size = size; self.pack = pack; self.offset = offset
        }
    }

    /// A page of the last archive's manifest (its root's list: the list archive's), by its
    /// first item: the archive whose `Manifest/{page}.n11page` it is, as the root describes
    /// it, and its `PageFingerprint`, which a later night compares with the page it would write
    /// to reuse this one instead (DESIGN.md §8.3).
    public struct Page: Sendable, Equatable {
        public let firstID: String
        public let archive: String
        public let page: Int64
        public let itemCount: Int64
        public let length: Int64
        public let sha256: String
        public let fingerprint: String

        public init(firstID: String, archive: String, page: Int64, itemCount: Int64, length: Int64, sha256: String, fingerprint: String) {
            self.firstID = firstID; self.archive = archive; self.page = page; self.itemCount = itemCount
            self.length = length; self.sha256 = sha256; self.fingerprint = fingerprint
        }
    }

    public struct Archive: Sendable, Equatable {
        public let id: String
        /// Its object's name in the destination, and size: how it is found there again.
        public let name: String
        public let size: Int64
        public let created: Date

        public init(id: String, name: String, size: Int64, created: Date) {
            self.id = id; self.name = name; self.size = size; self.created = created
        }
    }

    /// One destination's state after its last archive.
    public struct Destination: Sendable, Equatable {
        public let mode: ArchiveMode
        /// Who the archives open for (recipients' fingerprints, whether a password slot is
        /// there): a change makes a full archive, so one restore never needs two sets of keys.
        public let access: String
        /// Secure archives: the compartment key IDs the items were sealed under.
        public let vaultKeys: String
        /// The password slot's Argon2id (`opsLimit:memoryKiB:salt`), reused by the chain's
        /// next archives (one derivation per restore); empty without a password.
        public var passwordKDF = ""
        /// The last archive, and the archive whose root holds the page list its manifest is
        /// (itself, or the one its "same as" root names), with that root's SHA-256.
        public let lastArchive: String
        public let listArchive: String
        public let listRootSHA256: String
        /// Every archive an item or the page list is held by, and the last one.
        public let archives: [String: Archive]
        /// Its items (by ID, canonical text) are rows of the record, read in ID order with
        /// `items(of:from:through:)`: a night holds a page of them at a time, not the vault's.
        public let itemCount: Int
        /// Whether its page rows are the last manifest's (`pages(of:)`): written by a build
        /// that records pages. A state an older build wrote leaves page rows of a manifest
        /// before it, which are not this one's.
        public var pagesRecorded = false

        public init(mode: ArchiveMode, access: String, vaultKeys: String, lastArchive: String, listArchive: String,
                    listRootSHA256: String, archives: [String: Archive], itemCount: Int = 0) {
            self.mode = mode; self.access = access; self.vaultKeys = vaultKeys; self.lastArchive = lastArchive
            self.listArchive = listArchive; self.listRootSHA256 = listRootSHA256; self.archives = archives; self.itemCount = itemCount
        }
    }

    /// The record's items of one destination in ID order, pulled one at a time (a night
    /// walks them beside the vault's catalogue, which is in the same order).
    public final class ItemCursor {
        private let rows: SQLiteStatement?
        private var read: ArraySlice<(id: String, item: Item)>
        private let lock: NSLock

        fileprivate init(_ rows: SQLiteStatement, lock: NSLock) {
            self.rows = rows
            self.lock = lock
            read = []
        }

        fileprivate init(read: [(id: String, item: Item)]) {
            rows = nil
            lock = NSLock()
            self.read = read[...]
        }

        public func next() throws -> (id: String, item: Item)? {
            guard let rows else { return read.popFirst() }
            lock.lock()
            defer { lock.unlock() }
            guard try rows.step() else { return nil }
            return (rows.text(0), Item(archive: rows.text(3), sha256: rows.text(1), size: rows.int64(2),
                                       pack: rows.int64(4), offset: rows.int64(5)))
        }
    }

    private let database: SQLiteDatabase
    /// The connection is SQLite's multi-thread kind: one user at a time. A night reads items
    /// on the pack workers and stages rows on libzip's thread.
    private let lock = NSLock()

    private init(_ database: SQLiteDatabase) { self.database = database }

    /// Opens the home's record; one that does not read as one (damaged) is set aside under
    /// a dated name and a new one made, whose path is returned too (the night is full).
    public static func openSettingAsideDamage(in home: N11Home) throws -> (ShipmentRecord, setAside: String?) {
        do { return (try open(in: home), nil) } catch {
            let path = Path.join(home.root, fileName)
            let aside = path + ".damaged-" + String(Int(Date().timeIntervalSince1970))
            try FileSystem.move(path, to: aside)
            for suffix in ["-wal", "-shm"] { try? FileSystem.removeFile(path + suffix) }
            return (try open(in: home), aside)
        }
    }

    /// Opens (making it, 0600, if need be) the home's record.
    public static func open(in home: N11Home) throws -> ShipmentRecord {
        let path = Path.join(home.root, fileName)
        if try FileStatus.of(path) == nil {
            do { _ = try FileDescriptor.createExclusive(path, mode: 0o600) }
            catch let error as SystemError where error.errno == EEXIST {}
        }
        let record = ShipmentRecord(try SQLiteDatabase(path: path, access: .readWrite))
        try record.database.execute("""
            CREATE TABLE IF NOT EXISTS destinations(location TEXT PRIMARY KEY NOT NULL, mode TEXT NOT NULL, access TEXT NOT NULL,
                vault_keys TEXT NOT NULL, last_archive TEXT NOT NULL, list_archive TEXT NOT NULL, list_root_sha256 TEXT NOT NULL,
                password_kdf TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS archives(location TEXT NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL, size INTEGER NOT NULL,
                created INTEGER NOT NULL, PRIMARY KEY(location, id)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS items(location TEXT NOT NULL, id TEXT NOT NULL, sha256 TEXT NOT NULL, size INTEGER NOT NULL,
                archive TEXT NOT NULL, pack INTEGER NOT NULL, offset INTEGER NOT NULL, PRIMARY KEY(location, id)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS staged_items(night TEXT NOT NULL, id TEXT NOT NULL, sha256 TEXT NOT NULL, size INTEGER NOT NULL,
                archive TEXT NOT NULL, pack INTEGER NOT NULL, offset INTEGER NOT NULL, pid INTEGER NOT NULL,
                PRIMARY KEY(night, id)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS pages(location TEXT NOT NULL, first_id TEXT NOT NULL, archive TEXT NOT NULL,
                page INTEGER NOT NULL, item_count INTEGER NOT NULL, length INTEGER NOT NULL, sha256 TEXT NOT NULL,
                fingerprint TEXT NOT NULL, PRIMARY KEY(location, first_id)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS staged_pages(night TEXT NOT NULL, first_id TEXT NOT NULL, archive TEXT NOT NULL,
                page INTEGER NOT NULL, item_count INTEGER NOT NULL, length INTEGER NOT NULL, sha256 TEXT NOT NULL,
                fingerprint TEXT NOT NULL, pid INTEGER NOT NULL, PRIMARY KEY(night, first_id)) WITHOUT ROWID;
            """)
        record.dropDeadNights()
        return record
    }

    /// A night killed while it wrote its archive leaves its staged rows: those of processes
    /// no longer running go (a night that runs now, however long, keeps its own). Best
    /// effort: a record busy elsewhere is not damaged.
    private func dropDeadNights() {
        guard let pids = try? database.prepare("SELECT pid FROM staged_items UNION SELECT pid FROM staged_pages") else { return }
        var dead: [Int64] = []
        while (try? pids.step()) == true {
            let pid = pids.int64(0)
            if !AtomicFile.isRunning(Int32(truncatingIfNeeded: pid)) { dead.append(pid) }
        }
        for pid in dead {
            for table in ["staged_items", "staged_pages"] {
                guard let delete = try? database.prepare("DELETE FROM \(table) WHERE pid = ?") else { return }
                try? delete.bind(1, pid)
                _ = try? delete.step()
            }
        }
    }

    /// The destination's state, or nil if there is none; a record that contradicts itself
    /// (an item held by an archive it does not list) is none.
    public func destination(_ location: String) throws -> Destination? {
        lock.lock()
        defer { lock.unlock() }
        let head = try database.prepare("SELECT mode, access, vault_keys, last_archive, list_archive, list_root_sha256, password_kdf FROM destinations WHERE location = ?")
        try head.bind(1, location)
        guard try head.step() else { return nil }
        // `portable;pages`: written with its pages. An older build wrote `portable`, and
        // reads `portable;pages` as no record at all (a full night), never building on a
        // manifest whose pages it does not know (its "same as" root would name a page list
        // that reaches archives its header leaves out).
        let modeText = head.text(0)
        let pagesRecorded = modeText.hasSuffix(Self.pagesMarker)
        guard let mode = ArchiveMode(rawValue: pagesRecorded ? String(modeText.dropLast(Self.pagesMarker.count)) : modeText) else { return nil }
        let (access, vaultKeys, last, list, rootSHA, passwordKDF) = (head.text(1), head.text(2), head.text(3), head.text(4), head.text(5), head.text(6))
        var archives: [String: Archive] = [:]
        let rows = try database.prepare("SELECT id, name, size, created FROM archives WHERE location = ?")
        try rows.bind(1, location)
        while try rows.step() {
            archives[rows.text(0)] = Archive(id: rows.text(0), name: rows.text(1), size: rows.int64(2),
                                             created: Date(timeIntervalSince1970: TimeInterval(rows.int64(3)) / 1000))
        }
        // Every item held by an archive the record lists, or the record contradicts itself.
        // (A page row whose archive is not listed is only a page written again: `IncrementalBase`.)
        let orphans = try database.prepare("SELECT count(*) FROM items WHERE location = ?1 AND archive NOT IN (SELECT id FROM archives WHERE location = ?1)")
        try orphans.bind(1, location)
        guard try orphans.step(), orphans.int64(0) == 0 else { return nil }
        let count = try database.prepare("SELECT count(*) FROM items WHERE location = ?")
        try count.bind(1, location)
        guard try count.step() else { return nil }
        guard archives[last] != nil, archives[list] != nil else { return nil }
        var destination = Destination(mode: mode, access: access, vaultKeys: vaultKeys, lastArchive: last, listArchive: list,
                                      listRootSHA256: rootSHA, archives: archives, itemCount: Int(count.int64(0)))
        destination.passwordKDF = passwordKDF
        destination.pagesRecorded = pagesRecorded
        return destination
    }

    /// The items of `location` from ID `start` through ID `end` (nil: to the last), in ID order.
    /// A range (`end` given: a page's) is read whole here, under the lock, so that its
    /// statement is done with before another thread uses the connection; the whole list is
    /// walked a row at a time (a night's decision, while nothing else uses the record).
    public func items(of location: String, from start: String = "", through end: String? = nil) throws -> ItemCursor {
        lock.lock()
        defer { lock.unlock() }
        let rows = try database.prepare(end == nil
            ? "SELECT id, sha256, size, archive, pack, offset FROM items WHERE location = ? AND id >= ? ORDER BY id"
            : "SELECT id, sha256, size, archive, pack, offset FROM items WHERE location = ? AND id >= ? AND id <= ? ORDER BY id")
        try rows.bind(1, location); try rows.bind(2, start)
        guard let end else { return ItemCursor(rows, lock: lock) }
        try rows.bind(3, end)
        var read: [(id: String, item: Item)] = []
        while try rows.step() {
            read.append((rows.text(0), Item(archive: rows.text(3), sha256: rows.text(1), size: rows.int64(2),
                                            pack: rows.int64(4), offset: rows.int64(5))))
        }
        return ItemCursor(read: read)
    }

    /// The pages of `location`'s last manifest, by first item ID (a record made before pages
    /// were recorded has none: its next night writes every page). One row per page, about
    /// 2,600 items each: 1,200 rows at 3,000,000 items.
    public func pages(of location: String) throws -> [Page] {
        lock.lock()
        defer { lock.unlock() }
        let rows = try database.prepare("SELECT first_id, archive, page, item_count, length, sha256, fingerprint FROM pages WHERE location = ? ORDER BY first_id")
        try rows.bind(1, location)
        var pages: [Page] = []
        while try rows.step() {
            pages.append(Page(firstID: rows.text(0), archive: rows.text(1), page: rows.int64(2), itemCount: rows.int64(3),
                              length: rows.int64(4), sha256: rows.text(5), fingerprint: rows.text(6)))
        }
        return pages
    }

    /// Keeps rows of the archive being written (`night`: its ID) until `replace` takes them
    /// into the destination's record, or `discard` drops them: the archive's items are
    /// written out a page at a time while it is made, never held all at once.
    /// `page`: the manifest page they are the items of, as the night's root describes it.
    /// Row `n` of `count` is made when it is written (`row(n)`): a page's rows made all at
    /// once were about 1.6 MB for a moment on the thread that writes the archive (4,096
    /// parsed records, and three strings a row).
    public func stage(night: String, count: Int, page: Page, row: (Int) throws -> (id: String, item: Item)) throws {
        lock.lock()
        defer { lock.unlock() }
        try database.execute("BEGIN IMMEDIATE")
        do {
            let pid = Int64(getpid())
            let pageRow = try database.prepare("INSERT OR REPLACE INTO staged_pages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
            try pageRow.bind(1, night); try pageRow.bind(2, page.firstID); try pageRow.bind(3, page.archive)
            try pageRow.bind(4, page.page); try pageRow.bind(5, page.itemCount); try pageRow.bind(6, page.length)
            try pageRow.bind(7, page.sha256); try pageRow.bind(8, page.fingerprint); try pageRow.bind(9, pid)
            _ = try pageRow.step()
            let insert = try database.prepare("INSERT OR REPLACE INTO staged_items VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
            for n in 0..<count {
                let (id, i) = try row(n)
                insert.reset()
                try insert.bind(1, night); try insert.bind(2, id); try insert.bind(3, i.sha256); try insert.bind(4, i.size)
                try insert.bind(5, i.archive); try insert.bind(6, i.pack); try insert.bind(7, i.offset); try insert.bind(8, pid)
                _ = try insert.step()
            }
            try database.execute("COMMIT")
        } catch {
            try? database.execute("ROLLBACK")
            throw error
        }
    }

    /// Drops what `stage` kept for `night` (its archive was not published).
    public func discard(night: String) {
        lock.lock()
        defer { lock.unlock() }
        for table in ["staged_items", "staged_pages"] {
            guard let delete = try? database.prepare("DELETE FROM \(table) WHERE night = ?") else { return }
            try? delete.bind(1, night)
            _ = try? delete.step()
        }
    }

    /// Replaces what is recorded of `location`, in one transaction: its head and archives by
    /// `state`, its items by the rows staged for `night` (nil: an unchanged night, whose
    /// items stay as they are). Only the items that changed are written: a night of a large
    /// vault that changed little rewrites little.
    /// Its pages are replaced by those staged for `night` (an unchanged night's stay).
    /// `items`, `pages`: how many the archive lists; rows staged for fewer (some lost) are
    /// refused, and the record stays as it was.
    public func replace(_ location: String, with state: Destination, stagedNight night: String?, items: Int, pages: Int) throws {
        lock.lock()
        defer { lock.unlock() }
        try database.execute("BEGIN IMMEDIATE")
        do {
            if let night {
                for (table, expected, what) in [("staged_items", items, "item(s)"), ("staged_pages", pages, "manifest page(s)")] {
                    let staged = try database.prepare("SELECT count(*) FROM \(table) WHERE night = ?")
                    try staged.bind(1, night)
                    let count = try staged.step() ? staged.int64(0) : 0
                    guard count == Int64(expected) else {
                        throw SystemError("\(count) of the archive's \(expected) \(what) were staged in the record of what was shipped; it was kept as it was",
                                          path: location, errno: EIO)
                    }
                }
            }
            for table in ["destinations", "archives"] {
                let delete = try database.prepare("DELETE FROM \(table) WHERE location = ?")
                try delete.bind(1, location)
                _ = try delete.step()
            }
            if let night {
                let gone = try database.prepare("""
                    DELETE FROM items WHERE location = ?1 AND id NOT IN (SELECT id FROM staged_items WHERE night = ?2)
                    """)
                try gone.bind(1, location); try gone.bind(2, night)
                _ = try gone.step()
                let changed = try database.prepare("""
                    INSERT OR REPLACE INTO items SELECT ?1, s.id, s.sha256, s.size, s.archive, s.pack, s.offset
                    FROM staged_items s LEFT JOIN items i ON i.location = ?1 AND i.id = s.id
                    WHERE s.night = ?2 AND (i.id IS NULL OR i.sha256 != s.sha256 OR i.size != s.size
                                            OR i.archive != s.archive OR i.pack != s.pack OR i.offset != s.offset)
                    """)
                try changed.bind(1, location); try changed.bind(2, night)
                _ = try changed.step()
                let oldPages = try database.prepare("DELETE FROM pages WHERE location = ?")
                try oldPages.bind(1, location)
                _ = try oldPages.step()
                let newPages = try database.prepare("""
                    INSERT INTO pages SELECT ?1, first_id, archive, page, item_count, length, sha256, fingerprint
                    FROM staged_pages WHERE night = ?2
                    """)
                try newPages.bind(1, location); try newPages.bind(2, night)
                _ = try newPages.step()
                for table in ["staged_items", "staged_pages"] {
                    let taken = try database.prepare("DELETE FROM \(table) WHERE night = ?")
                    try taken.bind(1, night)
                    _ = try taken.step()
                }
            }
            let head = try database.prepare("INSERT INTO destinations VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
            for (n, value) in [location, state.mode.rawValue + (state.pagesRecorded ? Self.pagesMarker : ""), state.access, state.vaultKeys, state.lastArchive, state.listArchive,
                               state.listRootSHA256, state.passwordKDF].enumerated() {
                try head.bind(Int32(n + 1), value)
            }
            _ = try head.step()
            let archive = try database.prepare("INSERT INTO archives VALUES (?, ?, ?, ?, ?)")
            for a in state.archives.values {
                archive.reset()
                try archive.bind(1, location); try archive.bind(2, a.id); try archive.bind(3, a.name)
                try archive.bind(4, a.size); try archive.bind(5, Int64((a.created.timeIntervalSince1970 * 1000).rounded()))
                _ = try archive.step()
            }
            try database.execute("COMMIT")
        } catch {
            try? database.execute("ROLLBACK")
            throw error
        }
    }

    /// Forgets a destination (its next archive is a full one).
    public func forget(_ location: String) throws {
        lock.lock()
        defer { lock.unlock() }
        for table in ["destinations", "archives", "items", "pages"] {
            let delete = try database.prepare("DELETE FROM \(table) WHERE location = ?")
            try delete.bind(1, location)
            _ = try delete.step()
        }
    }
}
