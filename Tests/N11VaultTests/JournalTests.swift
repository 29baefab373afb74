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
    /// A vault with one photo, and a staging (not committed yet) that adds two new photos,
    /// written straight to their final paths, a new note written there by the writer thread
    /// (`stageNew`), and replaces the old photo by a note, staged out of sight (a move into
    /// place and the removal of the photo's file).
    func prepare(_ dir: String, store: KeyStore) throws -> (old: ItemMetadata, staging: VaultStaging, new: [ItemMetadata]) {
        let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
        let old = try vault.add(photo(randomBytes(100)))
        // The new items' rows are held back and put by `waitForWrites`, as a large change's are.
        vault.rowsGoStraightInBelow = 0
        let staging = try VaultStaging(vault: vault)
        var new: [ItemMetadata] = []
        func stage(id: String, kind: ItemKind, _ bytes: [UInt8], replaces: ItemMetadata?) throws -> ItemMetadata {
            try staging.stage(id: id, kind: kind, compartment: .vault, name: "n\(bytes.count)", created: Date(),
                              expires: nil, replaces: replaces) { file, key in
                let hashing = try HashingSource(MemorySource(bytes))
                let sealed = try SingleTagStream.seal(.chacha20Poly1305, key: key, from: hashing, to: file)
                return (sealed.tag, sealed.plaintextLength, hashing.sha256.hex)
            }
        }
        // Out of ID order: rows that come in order would go straight in.
        let ids = (0..<3).map { _ in UUID().uuidString }.sorted(by: >)
        for (n, size) in [10, 70_000].enumerated() { new.append(try stage(id: ids[n], kind: .photo, randomBytes(size), replaces: nil)) }
        new.append(try staging.stageNew(id: ids[2], kind: .note, compartment: .vault, name: "beside",
                                        created: Date(), expires: nil, sealing: MemorySource(Array("beside".utf8)), sizeHint: 6))
        try staging.waitForWrites()
        new.append(try stage(id: old.id, kind: .note, Array("now a note".utf8), replaces: old))
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

    @Test("killed before the commit: new items' files, written in place, are swept by the next writer; others' files stay")
    func beforeCommit() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = dir + "/vault"
            let (old, new): (ItemMetadata, [ItemMetadata]) = try {
                let (old, staging, new) = try prepare(dir, store: store)
                staging.abandon()
                return (old, new)
            }()
            let newFiles = new.filter { $0.id != old.id }.map { vault + "/" + $0.relativePath }
            #expect(newFiles.allSatisfy(exists), "new items are written at their final paths")
            // Not item names, or an item of a live row: never swept.
            let foreign = [vault + "/Photos/notes.txt", vault + "/Notes/not-a-uuid.n11note",
                           vault + "/Photos/\(UUID().uuidString.lowercased()).n11"]
            for path in foreign { try writeBytes([1], to: path) }

            #expect(try readerIDs(dir, store: store) == [old.id], "no row references them")
            #expect(newFiles.allSatisfy(exists), "a reader deletes nothing")
            #expect(try recoveredIDs(dir, store: store) == [old.id])
            #expect(!newFiles.contains(where: exists), "the writer swept them")
            #expect(foreign.allSatisfy(exists) && exists(vault + "/" + old.relativePath))
        }
    }

    @Test("a change has its files written back from its first content file to its commit point; a discard or an abandon stops that too")
    func writebackWhileStaging() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            try {   // the vault (and its lock) go at the end of this scope
                let empty = try VaultStaging(vault: try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true))
                #expect(!empty.fileSystem.isWritingBack, "before any content file")
                empty.discard()
            }()
            let (_, committed, _) = try prepare(dir, store: store)
            #expect(committed.fileSystem.isWritingBack)
            try committed.commit()
            #expect(!committed.fileSystem.isWritingBack, "past the commit point")
        }
        for end in ["discard", "abandon"] {
            try withTemporaryDirectory { dir in
                let (_, store) = try makeHome(in: dir)
                let (_, staging, _) = try prepare(dir, store: store)
                #expect(staging.fileSystem.isWritingBack)
                if end == "discard" { staging.discard() } else { staging.abandon() }
                #expect(!staging.fileSystem.isWritingBack, "after \(end)")
            }
        }
    }

    @Test("a change thrown away (an error, Ctrl-C) removes the files it wrote in place at once")
    func discarded() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let (old, staging, new) = try prepare(dir, store: store)
            staging.discard()
            for item in new where item.id != old.id { #expect(!exists(dir + "/vault/" + item.relativePath)) }
            #expect(listing(of: dir + "/vault").allSatisfy { !$0.hasPrefix(".n11staging-") })
            #expect(try readerIDs(dir, store: store) == [old.id])
        }
    }

    /// How the notes of `discardedPastTheSpill` are written.
    enum Writing: CaseIterable { case inPlace, besideTheAdd, besideTheAddStillQueued }

    @Test("a change of more items than it keeps paths for in memory removes every file it wrote when thrown away, on either thread",
          arguments: Writing.allCases)
    func discardedPastTheSpill(writing: Writing) throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let kept = try vault.add(note("kept"))
            let staging = try VaultStaging(vault: vault)
            // Past the in-memory batch, so that most paths are read back from the staged list.
            for n in 0..<(2 * 4096 + 10) {
                if writing != .inPlace {
                    _ = try staging.stageNew(id: UUID().uuidString, kind: .note, compartment: .vault, name: "n\(n)", created: Date(),
                                         expires: nil, sealing: MemorySource([UInt8(n & 0xff)]), sizeHint: 1)
                    continue
                }
                try staging.stage(id: UUID().uuidString, kind: .note, compartment: .vault, name: "n\(n)", created: Date(),
                                  expires: nil, replaces: nil) { file, key in
                    let hashing = try HashingSource(MemorySource([UInt8(n & 0xff)]))
                    let sealed = try SingleTagStream.seal(.chacha20Poly1305, key: key, from: hashing, to: file)
                    return (sealed.tag, sealed.plaintextLength, hashing.sha256.hex)
                }
            }
            // Thrown away while the writer thread still has notes to write, or once it has none.
            if writing != .besideTheAddStillQueued {
                try staging.waitForWrites()
                #expect(listing(of: dir + "/vault/Notes").count == 2 * 4096 + 11)
            }
            staging.discard()
            #expect(listing(of: dir + "/vault/Notes") == [Path.lastComponent(of: kept.relativePath)])
            #expect(listing(of: dir + "/vault").allSatisfy { !$0.hasPrefix(".n11staging-") })
        }
    }

    @Test("a new note whose final path is taken (a crash's leftover) is written out of sight by the writer thread and moved over it")
    func besideTheAddOverALeftover() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            _ = try vault.add(note("first"))
            let id = UUID().uuidString
            let leftover = dir + "/vault/Notes/\(id).n11note"
            try writeBytes(Array("left over".utf8), to: leftover)
            let staging = try VaultStaging(vault: vault)
            let item = try staging.stageNew(id: id, kind: .note, compartment: .vault, name: "over", created: Date(), expires: nil,
                                            sealing: MemorySource(Array("the new note".utf8)), sizeHint: 12)
            try staging.commit()
            #expect(try plaintext(of: item, in: vault) == Array("the new note".utf8))
            #expect(try readerIDs(dir, store: store).contains(id))
            #expect(listing(of: dir + "/vault").allSatisfy { !$0.hasPrefix(".n11staging-") })
        }
    }

    @Test("a file the writer thread cannot write fails the commit, and the change is thrown away whole")
    func besideTheAddFails() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let kept = try vault.add(note("kept"))
            let staging = try VaultStaging(vault: vault)
            for n in 0..<100 {
                _ = try staging.stageNew(id: UUID().uuidString, kind: .note, compartment: .vault, name: "n\(n)", created: Date(),
                                     expires: nil, sealing: MemorySource([UInt8(n)]), sizeHint: 1)
            }
            // Both places the last note may go are taken: its final path and its staged name.
            let id = UUID().uuidString
            try writeBytes([1], to: dir + "/vault/Notes/\(id).n11note")
            try writeBytes([2], to: staging.directory + "/\(id).n11note.content")
            _ = try staging.stageNew(id: id, kind: .note, compartment: .vault, name: "last", created: Date(), expires: nil,
                                 sealing: MemorySource([3]), sizeHint: 1)
            #expect(throws: VaultError.self) { try staging.commit() }
            #expect(listing(of: dir + "/vault/Notes").sorted()
                    == [Path.lastComponent(of: kept.relativePath), "\(id).n11note"].sorted(), "only the foreign file stays")
            #expect(listing(of: dir + "/vault").allSatisfy { !$0.hasPrefix(".n11staging-") })
            #expect(try readerIDs(dir, store: store) == [kept.id])
        }
    }

    @Test("killed after the commit, before or in the middle of its file steps: readers see the new state whole, and the next writer finishes it",
          arguments: [0, 1, 2])
    func afterCommit(applied: Int) throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let (expected, replacedID): (Set<String>, String) = try {
                let (old, staging, new) = try prepare(dir, store: store)
                try staging.commitAndAbandon()
                let steps = try pendingOperations(dir)
                #expect(steps.count == 2)
                try VaultStaging.apply(Array(steps.prefix(applied)), in: dir + "/vault", keyStore: store)
                return (Set([old.id] + new.map(\.id)), old.id)
            }()
            #expect(try readerIDs(dir, store: store) == expected, "a reader reads moved content where the pending rows say")
            let reader = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: false)
            let replaced = try reader.item(matching: replacedID)
            #expect(replaced.kind == .note)
            #expect(try plaintext(of: replaced, in: reader) == Array("now a note".utf8))
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

    @Test("a key store write killed half-way (a rotation's first step): the next vault writer removes its temp file, not a live one's")
    func deadKeyStoreTempFile() throws {
        try withTemporaryDirectory { dir in
            let (home, store) = try makeHome(in: dir)
            _ = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let dead = home.root + "/.n11tmp-999999999-keystore.n11keys.abc"   // no such PID
            let live = home.root + "/" + AtomicFile.tempName(for: "keystore.n11keys")
            for path in [dead, live] { try writeBytes([1], to: path) }
            _ = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: false)
            #expect(exists(dead), "a reader removes nothing")
            _ = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            #expect(!exists(dead) && exists(live))
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
