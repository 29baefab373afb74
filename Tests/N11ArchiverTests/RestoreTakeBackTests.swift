import Foundation
import Glibc
import Testing
import N11Archiver
import N11Crypto
import N11System
import N11TestSupport
import N11Vault

@Suite("Taking back a failed restore: only what this process created")
struct RestoreTakeBackTests {
    @Test("a vault this open created is taken back; one that existed, or holds items, never is")
    func vaultTakeBack() throws {
        try withTemporaryDirectory { dir in
            let store = try KeyStore.create(in: N11Home(root: dir + "/home"), pin: nil)
            let fresh = dir + "/fresh"
            let created = try Vault.open(at: fresh, keyStore: store, forWriting: true)
            #expect(created.removeIfCreated())
            #expect(!exists(fresh), "left: \(listing(of: fresh))")

            // A vault that was there before this open (another process made it): kept,
            // with its items.
            let other = dir + "/other"
            do {
                let first = try Vault.open(at: other, keyStore: store, forWriting: true)
                _ = try first.add(photo(randomBytes(100), name: "theirs.jpg"))
            }
            let before = snapshot(other)
            let reopened = try Vault.open(at: other, keyStore: store, forWriting: true)
            #expect(!reopened.removeIfCreated())
            // (SQLite's -wal and -shm are there while the catalogue is open: working files, not state.)
            #expect(snapshot(other).filter { !$0.key.hasSuffix("-wal") && !$0.key.hasSuffix("-shm") } == before)

            // A vault this open created, into which a commit got through: kept.
            let committed = dir + "/committed"
            let vault = try Vault.open(at: committed, keyStore: store, forWriting: true)
            _ = try vault.add(photo(randomBytes(100), name: "kept.jpg"))
            #expect(!vault.removeIfCreated())
            #expect(try vault.items().count == 1)

            // An empty directory the user made: the layout goes, the directory stays.
            let empty = dir + "/empty"
            try makeDirectory(empty)
            let inEmpty = try Vault.open(at: empty, keyStore: store, forWriting: true)
            #expect(inEmpty.removeIfCreated())
            #expect(exists(empty) && listing(of: empty).filter { $0 != ".lock" }.isEmpty, "\(listing(of: empty))")
        }
    }

    @Test("a key store made while holding the home lock is taken back; one with an archive key is not")
    func keyStoreTakeBack() throws {
        try withTemporaryDirectory { dir in
            let home = N11Home(root: dir + "/new-home")
            let store = try KeyStore.create(in: home, pin: nil, holdingLock: true)
            // Nobody else can load it meanwhile (a second load waits, then says busy).
            #expect(store.removeIfUnused())
            #expect(!exists(home.root))

            let used = N11Home(root: dir + "/used")
            let kept = try KeyStore.create(in: used, pin: nil)
            try kept.addArchiveKey(id: SecureRandom.bytes(16), key: try SecureBytes(randomCount: 32))
            #expect(!kept.removeIfUnused())
            #expect(exists(used.keyStorePath))
        }
    }
}
