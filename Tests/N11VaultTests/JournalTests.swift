import Foundation
import Testing
import N11TestSupport
@testable import N11Vault
import N11Crypto
import N11Format
import N11System

/// A VaultStaging change, crashed at each step by hand (Scripts/crashtest does it with real
/// SIGKILLs): readers, and the next writer, must see exactly the old state or the new one.
@Suite("Vault commits: recovery after a crash at every step")
struct JournalTests {
    /// A vault with one item, and a staging that adds two more (not committed yet).
    func prepare(_ dir: String, store: KeyStore) throws -> (old: ItemMetadata, staging: VaultStaging, new: [ItemMetadata]) {
        let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
        let old = try vault.add(photo(randomBytes(100)))
        let staging = try VaultStaging(vault: vault)
        var new: [ItemMetadata] = []
        for size in [10, 70_000] {
            let bytes = randomBytes(size)
            new.append(try staging.stage(id: UUID().uuidString, kind: .photo, compartment: .vault, name: "n\(size).jpg",
                                         created: Date(), expires: nil, replaces: nil) { file, key in
                let hashing = try HashingSource(MemorySource(bytes))
                let sealed = try SingleTagStream.seal(.chacha20Poly1305, key: key, from: hashing, to: file)
                return (sealed.tag, sealed.plaintextLength, hashing.sha256.hex)
            })
        }
        return (old, staging, new)
    }

    /// Reopens for writing (which recovers) and returns the IDs, checking every item reads.
    func recoveredIDs(_ dir: String, store: KeyStore) throws -> Set<String> {
        let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
        for item in try vault.items() { try vault.verify(item) }
        #expect(try vault.damagedItemIDs().isEmpty)
        #expect(listing(of: dir + "/vault").allSatisfy { !$0.hasPrefix(".n11staging-") }, "staging left behind")
        return Set(try vault.items().map(\.id))
    }

    /// What a reader (no lock, no recovery) sees: the IDs, each item read back whole.
    func readerIDs(_ dir: String, store: KeyStore) throws -> Set<String> {
        let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: false)
        for item in try vault.items() { try vault.verify(item) }
        #expect(try vault.damagedItemIDs().isEmpty)
        return Set(try vault.items().map(\.id))
    }

    /// The pending steps of the committed change, parsed.
    func pendingOperations(_ dir: String) throws -> [VaultStaging.Operation] {
        try TestCatalogue.pending(in: dir + "/vault").map { try #require(VaultStaging.Operation(line: Substring($0))) }
    }

    @Test("killed before the commit: the staged items are discarded")
    func beforeJournal() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let ids: Set<String> = try {
                let (old, staging, _) = try prepare(dir, store: store)
                staging.abandon()
                return [old.id]
            }()
            #expect(try readerIDs(dir, store: store) == ids)
            #expect(try recoveredIDs(dir, store: store) == ids)
        }
    }

    @Test("killed after the commit, before or in the middle of its file steps: readers see the new state whole, and the next writer finishes it",
          arguments: [0, 1, 2])
    func afterCommit(applied: Int) throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let expected: Set<String> = try {
                let (old, staging, new) = try prepare(dir, store: store)
                try staging.commitAndAbandon()
                let steps = try pendingOperations(dir)
                #expect(steps.count == 2)
                try VaultStaging.apply(Array(steps.prefix(applied)), in: dir + "/vault", keyStore: store)
                return Set([old.id] + new.map(\.id))
            }()
            #expect(try readerIDs(dir, store: store) == expected, "a reader reads moved content where the pending rows say")
            #expect(try recoveredIDs(dir, store: store) == expected)
            #expect(try TestCatalogue.pending(in: dir + "/vault").isEmpty)
        }
    }

    @Test("a journal replayed after it fully ran changes nothing, also when an item changed kind")
    func replayIsIdempotent() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let old = try vault.add(photo(randomBytes(50)))
            let staging = try VaultStaging(vault: vault)
            let text = Array("now a note".utf8)
            let replacement = try staging.stage(id: old.id, kind: .note, compartment: .vault, name: "n.txt", created: Date(),
                                                expires: nil, replaces: old) { file, key in
                let sealed = try SingleTagStream.seal(.chacha20Poly1305, key: key, from: MemorySource(text), to: file)
                return (sealed.tag, sealed.plaintextLength, try SHA256Digest.hash(text).hex)
            }
            #expect(try TestCatalogue.pending(in: dir + "/vault").isEmpty, "uncommitted: another connection sees none of it")
            let steps = try #require(vault.catalogue).pendingOperations().map { try #require(VaultStaging.Operation(line: Substring($0))) }
            #expect(steps.count == 2, "a move into the note's place and the removal of the photo")
            try staging.commit()
            // The same journal again, as a crash between the last step and the cleanup would cause.
            try VaultStaging.apply(steps, in: dir + "/vault", keyStore: store)
            let reread = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: false)
            let item = try reread.item(matching: old.id)
            #expect(item.kind == .note && item.contentTag == replacement.contentTag)
            #expect(try plaintext(of: item, in: reread) == text)
            #expect(!exists(reread.contentPath(of: old)), "the old photo file is gone")
        }
    }

    @Test("a temp file of a running process is left alone; a dead one's is removed")
    func liveTempFiles() throws {
        try withTemporaryDirectory { dir in
            let mine = dir + "/" + AtomicFile.tempName(for: "x")
            let dead = dir + "/.n11tmp-999999999-x.abc"   // no such PID
            let unnamed = dir + "/.n11tmp-y"
            for path in [mine, dead, unnamed] { try writeBytes([1], to: path) }
            #expect(AtomicFile.removeLeftovers(in: dir) == 2)
            #expect(exists(mine) && !exists(dead) && !exists(unnamed))
        }
    }
}
