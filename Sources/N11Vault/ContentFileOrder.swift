import N11Format
import N11System

/// The vault's content files in the order of their inodes, for a pass that reads every one
/// of them (`Vault.forEachItemInDiskOrder`). Item IDs are random, so ID order reads the files
/// at random places on the disk; a file system gives inodes, and the blocks after them, in
/// the order files were made, so inode order reads them about in sequence. Measured on this
/// project's 2-core VM, `vault verify` of 1,000,000 notes with the page cache dropped: 361 s
/// in ID order, 136 s in inode order (BENCHMARKS.md; DESIGN.md §8.6).
///
/// The listing lives in a scratch database (`SQLiteDatabase.Access.scratch`): millions of
/// names never sit in memory (issue 34). It holds item IDs, kinds and inode numbers, nothing else.
final class ContentFileOrder {
    private let database: SQLiteDatabase
    /// Made with the index by ID, when first asked.
    private var findID: SQLiteStatement?

    /// Lists `Notes/` and `Photos/` of the vault at `vaultPath` (a folder that is not there
    /// lists nothing). Names that are no content file's are left out.
    init(vaultPath: String) throws {
        database = try SQLiteDatabase.scratch(purpose: "the vault's content files in disk order (a scratch database in $TMPDIR)",
                                              cacheKiB: 4096)
        try database.execute("CREATE TABLE files(inode INTEGER NOT NULL, id TEXT NOT NULL, kind TEXT NOT NULL)")
        let insert = try database.prepare("INSERT INTO files(inode, id, kind) VALUES (?1, ?2, ?3)")
        let vault = try DirectoryHandle.open(vaultPath)
        for kind in ItemKind.allCases {
            guard try vault.status(of: kind.directory)?.kind == .directory else { continue }
            let suffix = "." + kind.fileExtension
            try vault.openSubdirectory(kind.directory).forEachEntryAndInode { name, inode in
                guard name.hasSuffix(suffix) else { return }
                try insert.bind(1, Int64(bitPattern: inode))
                try insert.bind(2, String(name.dropLast(suffix.count)))
                try insert.bind(3, kind.rawValue)
                _ = try insert.step()
                insert.reset()
            }
        }
        // Indexed once filled: SQLite sorts the rows in one go instead of inserting each into
        // a B-tree at a random place. The index holds the IDs too, so the walk reads it alone.
        try database.execute("CREATE INDEX files_by_inode ON files(inode, id, kind)")
    }

    /// The listed files in inode order, `batchSize` at a time, until `body` returns false.
    /// One ID may come twice, once for each kind's folder (a leftover in the other one).
    func forEachBatch(of batchSize: Int, _ body: ([(id: String, kind: ItemKind)]) throws -> Bool) throws {
        let rows = try database.prepare("SELECT id, kind FROM files ORDER BY inode, id, kind")
        var batch: [(id: String, kind: ItemKind)] = []
        batch.reserveCapacity(batchSize)
        while try rows.step() {
            guard let kind = ItemKind(rawValue: rows.text(1)) else { continue }   // only this type wrote it
            batch.append((rows.text(0), kind))
            if batch.count == batchSize {
                guard try body(batch) else { return }
                batch.removeAll(keepingCapacity: true)
            }
        }
        if !batch.isEmpty { _ = try body(batch) }
    }

    /// Whether a content file of `id` was listed in `kind`'s folder, or in either for nil
    /// (indexed by ID when first asked: only a pass for items without a listed file asks).
    func lists(id: String, kind: ItemKind?) throws -> Bool {
        if findID == nil {
            try database.execute("CREATE INDEX files_by_id ON files(id, kind)")
            findID = try database.prepare("SELECT 1 FROM files WHERE id = ?1 AND (?2 = '' OR kind = ?2)")
        }
        guard let findID else { return false }
        defer { findID.reset() }
        try findID.bind(1, id)
        try findID.bind(2, kind?.rawValue ?? "")
        return try findID.step()
    }
}
