import Foundation
import N11System
import N11Vault

/// Test access to a vault's catalogue (`Catalogue.sqlite`), to leave it as damage, an attacker
/// or an older version would: through SQLite, as a separate process would.
public enum TestCatalogue {
    public static func path(_ vault: String) -> String { vault + "/Catalogue.sqlite" }

    /// Every row: ID and sealed record, by ID.
    public static func records(in vault: String) throws -> [(id: String, record: [UInt8])] {
        let database = try SQLiteDatabase(path: path(vault), access: .readOnly)
        let rows = try database.prepare("SELECT id, record FROM items ORDER BY id")
        var found: [(id: String, record: [UInt8])] = []
        while try rows.step() { found.append((rows.text(0), rows.blob(1))) }
        return found
    }

    public static func record(id: String, in vault: String) throws -> [UInt8]? {
        try records(in: vault).first { $0.id == id }?.record
    }

    /// Puts `bytes` as the record of `id` (a new row or a replaced one).
    public static func setRecord(_ bytes: [UInt8], id: String, in vault: String) throws {
        let database = try SQLiteDatabase(path: path(vault), access: .readWrite)
        let statement = try database.prepare("INSERT OR REPLACE INTO items(id, record) VALUES(?1, ?2)")
        try statement.bind(1, id)
        try statement.bind(2, blob: bytes)
        try statement.step()
    }

    public static func flipRecordByte(id: String, at offset: Int, in vault: String) throws {
        var bytes = try require(try record(id: id, in: vault), "no row for \(id)")
        bytes[offset] ^= 1
        try setRecord(bytes, id: id, in: vault)
    }

    /// The pending file steps a committed change has not carried out.
    public static func pending(in vault: String) throws -> [String] {
        let database = try SQLiteDatabase(path: path(vault), access: .readOnly)
        let rows = try database.prepare("SELECT operation FROM pending ORDER BY step")
        var lines: [String] = []
        while try rows.step() { lines.append(rows.text(0)) }
        return lines
    }

    /// Appends pending steps, as a committed change that was killed before its steps (or
    /// someone who could write the catalogue) would leave them.
    public static func addPending(_ lines: [String], in vault: String) throws {
        let database = try SQLiteDatabase(path: path(vault), access: .readWrite)
        for line in lines {
            let statement = try database.prepare("INSERT INTO pending(operation) VALUES(?1)")
            try statement.bind(1, line)
            try statement.step()
        }
    }

    /// Turns a vault back into the v1 layout (`Meta/{ID}.n11meta` for each row, no catalogue),
    /// as n11archive before the catalogue wrote it.
    public static func downgradeToVersion1(_ vault: String) throws {
        let rows = try records(in: vault)
        try FileManager.default.createDirectory(atPath: vault + "/Meta", withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        for (id, record) in rows { try writeBytes(record, to: vault + "/Meta/\(id).n11meta") }
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path(vault) + suffix) }
    }
}

private func require<T>(_ value: T?, _ message: String) throws -> T {
    guard let value else { throw TestCatalogueError(message) }
    return value
}

struct TestCatalogueError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
