import Foundation
import Glibc
import Testing
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// `Vault.forEachItemInDiskOrder`, what `vault verify` reads the vault with: content files in
/// inode order, and still every row of the catalogue exactly once, whatever the folders hold.
@Suite("Vault items in disk order")
struct DiskOrderTests {
    private static func inode(_ path: String) throws -> UInt64 {
        var st = stat()
        guard lstat(path, &st) == 0 else { throw SystemError("cannot stat", path: path) }
        return UInt64(st.st_ino)
    }

    @Test("items come in the order of their content files' inodes, each once, in batches of the size asked")
    func inodeOrder() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let added = try vault.add((0..<300).map { i in
                i % 3 == 0 ? photo(randomBytes(40 + i), name: "p\(i).jpg") : note("note \(i)", name: "n\(i)")
            })
            // Removing and adding again reuses freed inodes, so inode order is not the order of adding.
            try vault.remove(Array(added.prefix(60)))
            let again = try vault.add((0..<60).map { note("again \($0)", name: "a\($0)") })
            let reader = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: false)
            var seen: [ItemMetadata] = [], batches: [Int] = []
            try reader.forEachItemInDiskOrder(batchSize: 64) { batch, damaged in
                #expect(damaged.isEmpty)
                seen += batch
                batches.append(batch.count)
                return true
            }
            let expected = Set((Array(added.dropFirst(60)) + again).map(\.id))
            #expect(seen.count == expected.count && Set(seen.map(\.id)) == expected, "every item once")
            let inodes = try seen.map { try Self.inode(reader.contentPath(of: $0)) }
            #expect(inodes == inodes.sorted(), "in inode order")
            #expect(seen.map(\.id) != seen.map(\.id).sorted(), "not ID order")
            #expect(batches.dropLast().allSatisfy { $0 == 64 } && batches.reduce(0, +) == expected.count)
        }
    }

    @Test("a row without its file comes last, a leftover file is no item, a file in the other folder does not count twice, a damaged record comes once")
    func everyRowOnce() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vaultPath = dir + "/vault"
            let vault = try Vault.open(at: vaultPath, keyStore: store, forWriting: true)
            let items = try vault.add((0..<40).map { note("note \($0)", name: "n\($0)") })
            let missing = items[3], doubled = items[7], damaged = items[11]
            // The file of one item gone; a copy of another's under the photo folder's name;
            // a file no row names; a record that no longer opens (its file still there, and a
            // copy of it in the photo folder too).
            try FileManager.default.removeItem(atPath: vault.contentPath(of: missing))
            for item in [doubled, damaged] {
                try FileManager.default.copyItem(atPath: vault.contentPath(of: item),
                                                 toPath: vaultPath + "/" + ItemKind.photo.relativePath(id: item.id))
            }
            try FileManager.default.copyItem(atPath: vault.contentPath(of: items[0]),
                                             toPath: vaultPath + "/" + ItemKind.note.relativePath(id: "00000000-0000-4000-8000-000000000000"))
            try TestCatalogue.flipRecordByte(id: damaged.id, at: 20, in: vaultPath)

            let reader = try Vault.open(at: vaultPath, keyStore: store, forWriting: false)
            var seen: [String] = [], damagedSeen: [String] = []
            try reader.forEachItemInDiskOrder(batchSize: 8) { batch, damagedIDs in
                seen += batch.map(\.id)
                damagedSeen += damagedIDs
                return true
            }
            #expect(damagedSeen == [damaged.id])
            #expect(seen.count == 39 && Set(seen) == Set(items.map(\.id)).subtracting([damaged.id]), "every intact row once")
            #expect(seen.last == missing.id, "the row whose file was not listed comes after the listed ones")
            #expect(throws: VaultError.self) { try reader.verify(items.first { $0.id == missing.id }!) }
        }
    }

    @Test("stopping: body's false ends the walk, and its error reaches the caller as it is")
    func stopping() throws {
        struct Stop: Error {}
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            _ = try vault.add((0..<50).map { note("note \($0)", name: "n\($0)") })
            var calls = 0
            try vault.forEachItemInDiskOrder(batchSize: 10) { _, _ in calls += 1; return calls < 2 }
            #expect(calls == 2)
            #expect(throws: Stop.self) { try vault.forEachItemInDiskOrder(batchSize: 10) { _, _ in throw Stop() } }
        }
    }
}
