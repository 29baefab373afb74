import Foundation
import Glibc
import Testing
import N11System
import N11TestSupport
@testable import N11Vault

/// `CatalogueWarmer`, the sweep that reads the catalogue into the page cache beside
/// `vault verify`'s lookups: it warms the whole file, and it never drops SQLite's locks
/// (closing any descriptor of a file drops every POSIX lock the process holds on it).
@Suite("The catalogue read ahead in one sweep")
struct CatalogueWarmerTests {
    /// This process's POSIX locks on the file, as /proc/locks lists them.
    private func locksHeld(on path: String) throws -> Int {
        var st = stat()
        try #require(stat(path, &st) == 0)
        let inode = ":\(UInt64(st.st_ino))"   // the field is MAJOR:MINOR:INODE
        let table = try String(contentsOfFile: "/proc/locks", encoding: .utf8)
        return table.split(separator: "\n").filter { line in
            let fields = line.split(separator: " ")
            return fields.contains("POSIX") && fields.contains(Substring(String(getpid()))) && fields.contains { $0.hasSuffix(inode) }
        }.count
    }

    @Test("the whole catalogue comes back into the cache, and a reader's locks on it stay")
    func warmsWithoutDroppingLocks() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            do {   // closed again at the end of the block
                let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
                _ = try vault.add((0..<400).map { note(String(repeating: "n\($0) ", count: 200), name: "n\($0)") })
            }
            let path = dir + "/vault/" + VaultCatalogue.fileName

            // Out of the cache first (a descriptor of our own: no connection is open).
            let fd = open(path, O_RDONLY)
            #expect(fsync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
            close(fd)
            let before = try residentPages(path)
            try #require(before.pages > 8 && before.resident == 0,
                         "this file system keeps pages after POSIX_FADV_DONTNEED; the test cannot tell")

            // A reader in the middle of a read transaction holds POSIX locks on the file.
            do {
                let reader = try SQLiteDatabase(path: path, access: .readWrite)
                try reader.execute("BEGIN; SELECT count(*) FROM items")
                let locks = try locksHeld(on: path)
                try #require(locks > 0, "the reader holds no lock on the catalogue; the test cannot tell")
                let warmer = try #require(CatalogueWarmer.start(path))
                warmer.wait()
                warmer.stop()
                #expect(try locksHeld(on: path) == locks, "the warmer dropped the reader's locks")
                try reader.execute("COMMIT")
            }
            let after = try residentPages(path)
            #expect(after.resident == after.pages)

            // Nothing to warm: missing, a directory.
            #expect(CatalogueWarmer.start(dir + "/missing") == nil)
            #expect(CatalogueWarmer.start(dir) == nil)
        }
    }
}
