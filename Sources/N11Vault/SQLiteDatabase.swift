internal import CSQLite
import Glibc
import N11System

/// One connection to an SQLite database file: the few calls the vault catalogue needs, each
/// result code checked here, the C handles owned by one `deinit` each. Failures are
/// `SystemError`s naming the file, with an errno that says what kind of failure it was
/// (`EBUSY` locked, `ENOSPC` full, `EROFS` read-only, `EBADMSG` not a database or damaged,
/// `ENOENT` missing), so the layers above treat them like any other file failure.
///
/// Not thread-safe: one connection per thread (SQLite is built serialized, but a statement
/// and its rows belong to one user at a time).
public final class SQLiteDatabase {
    public let path: String
    private let handle: OpaquePointer

    public enum Access {
        /// Reading only; the file must exist.
        case readOnly
        /// Reading only a file nobody can change while it is open (one on a read-only file
        /// system): SQLite then needs no `-shm`/`-wal` beside it, which it could not create there.
        case immutable
        /// Reading and writing; the file must exist (the caller makes it, with the mode it
        /// needs: SQLite would make it 0644).
        case readWrite
        /// A private scratch database of this connection's own (`path` only names it in
        /// errors): SQLite keeps it in its page cache and spills to a file (0600, O_EXCL and
        /// O_NOFOLLOW) that it unlinks as it opens it, so a kill leaves nothing behind, in the
        /// first usable of `$SQLITE_TMPDIR`, `$TMPDIR`, `/var/tmp`, `/usr/tmp`, `/tmp`, `.`.
        case scratch
    }

    /// Opens `path`, never through a symbolic link (SQLITE_OPEN_NOFOLLOW), without URI
    /// parsing and without SQLite's shared cache. Waits up to `busyTimeout` seconds for a lock.
    public init(path: String, access: Access, busyTimeout: Double = 10) throws(SystemError) {
        self.path = path
        var flags = SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_PRIVATECACHE | SQLITE_OPEN_NOMUTEX
        switch access {
        case .readOnly, .immutable: flags |= SQLITE_OPEN_READONLY
        case .readWrite: flags |= SQLITE_OPEN_READWRITE
        case .scratch: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        }
        var name = access == .scratch ? "" : path
        if access == .immutable {
            // Only a URI carries `immutable`; its path is percent-encoded byte by byte.
            flags |= SQLITE_OPEN_URI
            name = "file:" + Self.percentEncoded(path) + "?immutable=1"
        }
        var opened: OpaquePointer?
        let code = sqlite3_open_v2(name, &opened, flags, nil)
        guard let opened else { throw SystemError("cannot open the database", path: path, errno: ENOMEM) }
        guard code == SQLITE_OK else {
            let error = Self.error(code, opened, "cannot open the database", path: path)
            sqlite3_close_v2(opened)
            throw error
        }
        handle = opened
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, Int32(min(busyTimeout * 1000, Double(Int32.max))))
    }

    deinit { sqlite3_close_v2(handle) }

    /// Reads the database file's bytes at `offset` into `buffer` through SQLite's own handle
    /// of the file (`SQLITE_FCNTL_FILE_POINTER`, the VFS's `xRead`), for the page cache's sake
    /// (`CatalogueWarmer`): an `open(2)` of our own would not do, since closing any
    /// descriptor of a file drops every POSIX lock the process holds on it, SQLite's
    /// included, while SQLite's VFS keeps a descriptor open until no connection of the
    /// process holds a lock. Returns false past the end of the file or on any failure.
    func readFileBytes(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Bool {
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(handle, "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK,
              let file, let methods = file.pointee.pMethods, let read = methods.pointee.xRead,
              let size = methods.pointee.xFileSize else { return false }
        var length: sqlite3_int64 = 0
        guard size(file, &length) == SQLITE_OK, offset < length else { return false }
        let code = read(file, buffer.baseAddress, Int32(min(buffer.count, Int(length - offset))), offset)
        return code == SQLITE_OK
    }

    /// A scratch database (`Access.scratch`) ready for rows: nothing to recover after a
    /// crash, so neither journal nor sync, and one transaction that is never committed
    /// (closing throws it away). `cacheKiB` bounds the memory it takes.
    public static func scratch(purpose: String, cacheKiB: Int) throws(SystemError) -> SQLiteDatabase {
        let database = try SQLiteDatabase(path: purpose, access: .scratch)
        try database.execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -\(cacheKiB); BEGIN")
        return database
    }

    private static func percentEncoded(_ path: String) -> String {
        let plain = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/-._~".utf8)
        var encoded = ""
        for byte in path.utf8 {
            if plain.contains(byte) { encoded.append(Character(UnicodeScalar(byte))) }
            else { encoded += "%" + [byte].hex.uppercased() }
        }
        return encoded
    }

    /// Runs SQL that returns no rows (schema, pragmas, BEGIN/COMMIT).
    public func execute(_ sql: String) throws(SystemError) {
        let code = sqlite3_exec(handle, sql, nil, nil, nil)
        guard code == SQLITE_OK else { throw fail(code, "cannot update the database") }
    }

    /// How many statements this connection compiled: the tests hold per-item paths to none.
    private(set) var statementsPrepared = 0

    /// A compiled statement, run with `SQLiteStatement.step` as often as it is bound anew.
    public func prepare(_ sql: String) throws(SystemError) -> SQLiteStatement {
        statementsPrepared += 1
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else { throw fail(code, "cannot read the database") }
        return SQLiteStatement(statement, database: self)
    }

    /// The single integer a query such as `PRAGMA user_version` returns.
    public func integer(_ sql: String) throws(SystemError) -> Int64? {
        let statement = try prepare(sql)
        guard try statement.step() else { return nil }
        return statement.int64(0)
    }

    /// Rows the last INSERT, UPDATE or DELETE changed (0 for an INSERT OR IGNORE that found its key).
    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// Whether a transaction is open on this connection.
    public var inTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    func fail(_ code: Int32, _ operation: String) -> SystemError {
        Self.error(code, handle, operation, path: path)
    }

    private static func error(_ code: Int32, _ handle: OpaquePointer, _ operation: String, path: String) -> SystemError {
        let message = String(cString: sqlite3_errmsg(handle))
        let system = sqlite3_system_errno(handle)
        let errno: Int32
        switch code & 0xff {
        case SQLITE_BUSY, SQLITE_LOCKED: errno = EBUSY
        case SQLITE_FULL: errno = ENOSPC
        case SQLITE_READONLY: errno = EROFS
        case SQLITE_PERM, SQLITE_AUTH: errno = EACCES
        case SQLITE_NOMEM: errno = ENOMEM
        case SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_FORMAT, SQLITE_MISMATCH, SQLITE_CONSTRAINT: errno = EBADMSG
        case SQLITE_CANTOPEN, SQLITE_IOERR: errno = system != 0 ? system : EIO
        default: errno = system != 0 ? system : EIO
        }
        return SystemError("\(operation) (\(message))", path: path, errno: errno)
    }
}

/// A compiled SQL statement of one `SQLiteDatabase`. Parameters are numbered from 1 and
/// columns from 0, as in SQLite; bound text and blobs are copied, so the caller's buffers
/// may go at once.
public final class SQLiteStatement {
    private let handle: OpaquePointer
    private let database: SQLiteDatabase

    fileprivate init(_ handle: OpaquePointer, database: SQLiteDatabase) {
        self.handle = handle
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    public func bind(_ index: Int32, _ text: String) throws(SystemError) {
        try check(sqlite3_bind_text(handle, index, text, -1, n11_sqlite_transient()))
    }

    public func bind(_ index: Int32, _ value: Int64) throws(SystemError) {
        try check(sqlite3_bind_int64(handle, index, value))
    }

    public func bind(_ index: Int32, blob: [UInt8]) throws(SystemError) {
        let code = blob.withUnsafeBytes { bytes in
            // A zero-length blob is still a blob, not NULL: SQLite needs a non-null pointer for that.
            sqlite3_bind_blob(handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count),
                              n11_sqlite_transient())
        }
        try check(code)
    }

    /// Runs the statement to its next row: true if there is one to read, false when done.
    /// Resets it when done, so it can be bound and run again.
    @discardableResult
    public func step() throws(SystemError) -> Bool {
        let code = sqlite3_step(handle)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE:
            sqlite3_reset(handle)
            return false
        default:
            sqlite3_reset(handle)
            throw database.fail(code, "cannot use the database")
        }
    }

    /// Makes the statement ready to be bound and run again, wherever it stopped.
    public func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    public func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    public func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    /// A text column's UTF-8 bytes as a String (empty for NULL).
    public func text(_ column: Int32) -> String {
        guard let bytes = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    /// A blob column's bytes (empty for NULL or an empty blob).
    public func blob(_ column: Int32) -> [UInt8] {
        guard let bytes = sqlite3_column_blob(handle, column) else { return [] }
        let count = Int(sqlite3_column_bytes(handle, column))
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    private func check(_ code: Int32) throws(SystemError) {
        guard code == SQLITE_OK else { throw database.fail(code, "cannot use the database") }
    }
}
