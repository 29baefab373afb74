import N11System

/// A table of 64-bit keys, each with a 64-bit value, that may grow to millions of rows while
/// the memory it takes stays bounded by SQLite's page cache: rows beyond it live in a scratch
/// database's file, unlinked as it is opened (`SQLiteDatabase.Access.scratch`), so a kill
/// leaves nothing behind. For the working sets that would otherwise grow with an archive's
/// item count (issue 34): an export's names taken, say. What goes in must tell nothing
/// about names or content (`ScratchDigest`s, positions, item IDs): the file is not sealed.
public final class ScratchKeyTable {
    private let database: SQLiteDatabase
    private let insertRow: SQLiteStatement
    private let findRow: SQLiteStatement

    /// `purpose` names it in errors ("the export's names"); `cacheKiB` bounds its memory.
    public init(purpose: String, cacheKiB: Int = 2048) throws(SystemError) {
        database = try SQLiteDatabase.scratch(purpose: purpose, cacheKiB: cacheKiB)
        try database.execute("CREATE TABLE rows(key INTEGER PRIMARY KEY, value INTEGER NOT NULL)")
        insertRow = try database.prepare("INSERT OR IGNORE INTO rows(key, value) VALUES (?1, ?2)")
        findRow = try database.prepare("SELECT value FROM rows WHERE key = ?1")
    }

    /// Adds `key` with `value`; false, and nothing changed, if the table has `key` already.
    @discardableResult
    public func insert(_ key: Int64, value: Int64 = 0) throws(SystemError) -> Bool {
        try insertRow.bind(1, key)
        try insertRow.bind(2, value)
        try insertRow.step()
        return database.changes == 1
    }

    /// The value of `key`, or nil if the table does not have it.
    public func value(of key: Int64) throws(SystemError) -> Int64? {
        try findRow.bind(1, key)
        defer { findRow.reset() }
        guard try findRow.step() else { return nil }
        return findRow.int64(0)
    }
}
