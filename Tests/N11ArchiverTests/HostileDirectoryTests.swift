import Foundation
import Glibc
import Testing
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// Another local user who can write to the directory an export goes into (or to a vault's
/// directory) plants links and files there. Nothing of theirs may be followed, entered or
/// deleted, no plaintext may land outside the directory, and an export is all or nothing.
@Suite("Hostile directories: planted links, foreign folders, races, long names")
struct HostileDirectoryTests {
    /// A vault with a photo and a note, its portable archive, and a directory of someone
    /// else's files that an attacker would like us to delete or write into.
    struct World {
        let dir: String
        let vault: Vault
        let store: KeyStore
        let photoBytes = randomBytes(70_000)
        let archive: String
        let victim: String
        let victimBefore: Snapshot

        init(dir: String) throws {
            self.dir = dir
            (store, vault) = try makeVault(in: dir, name: "source")
            _ = try vault.add(photo(photoBytes, name: "p.jpg"))
            _ = try vault.add(note(Array("hello".utf8), name: "n.txt"))
            archive = dir + "/a.nu11vlt"
            try createArchive(from: vault, mode: .portable, to: archive, formatVersion: 2)   // damagedArchive edits the photo's own entry
            victim = dir + "/victim"
            try makeDirectory(victim)
            try writeBytes(Array("precious".utf8), to: victim + "/keep.txt")
            try writeBytes(Array("ssh-ed25519 AAAA".utf8), to: victim + "/authorized_keys")
            victimBefore = snapshot(victim)
        }

        func export(to directory: String, overwrite: Bool = false, archive path: String? = nil,
                    progress: ArchiveProgress? = nil) throws -> ArchiveRestorer.Report {
            try ArchiveExporter.export(try unlock(path ?? archive, keyStore: nil), to: directory, keyStore: nil,
                                       .init(overwrite: overwrite, dryRun: false), progress: progress)
        }

        /// The archive with one byte of the photo's ciphertext flipped: its export fails.
        func damagedArchive() throws -> String {
            var bytes = try readBytes(archive)
            let photoID = try unlock(archive, keyStore: nil).items.all().first { $0.kind == .photo }!.id
            let entry = try #require(try RawZip.parse(bytes).entry(named: EntryName.item(id: photoID, kind: .photo)))
            bytes[entry.dataOffset + 100] ^= 0x01
            let path = dir + "/damaged.nu11vlt"
            try writeBytes(bytes, to: path)
            return path
        }
    }

    static let nobody: uid_t = 65534

    @Test("an export's leftover sweep never follows a planted .n11tmp- link, nor enters another user's directory")
    func sweepDoesNotFollowLinks() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir)
            let exportDir = dir + "/export"
            try makeDirectory(exportDir)
            // A name without a PID counts as a dead writer's: exactly what the sweep removes.
            #expect(symlink(w.victim, exportDir + "/.n11tmp-x") == 0)
            let foreign = exportDir + "/.n11tmp-y"
            try makeDirectory(foreign)
            try writeBytes(Array("theirs".utf8), to: foreign + "/file")
            #expect(chown(foreign, Self.nobody, Self.nobody) == 0 && chown(foreign + "/file", Self.nobody, Self.nobody) == 0)

            // A failing export ("nothing was written") and a succeeding one both sweep.
            expectArchiveError("damaged", kind: .damaged) { _ = try w.export(to: exportDir, archive: try w.damagedArchive()) }
            #expect(snapshot(w.victim) == w.victimBefore, "\(difference(w.victimBefore, snapshot(w.victim)))")
            _ = try w.export(to: exportDir)
            #expect(snapshot(w.victim) == w.victimBefore, "\(difference(w.victimBefore, snapshot(w.victim)))")
            #expect(try readBytes(foreign + "/file") == Array("theirs".utf8))
            #expect(try readBytes(exportDir + "/Photos/p.jpg") == w.photoBytes)
        }
    }

    @Test("a vault's recovery never follows a planted .n11staging- link nor replays a journal read through it")
    func vaultRecoveryDoesNotFollowLinks() throws {
        try withTemporaryDirectory { dir in
            let victim = dir + "/victim"
            try makeDirectory(victim)
            let (store, vaultPath, items): (KeyStore, String, [ItemMetadata]) = try {
                let (store, vault) = try makeVault(in: dir, name: "v")
                _ = try vault.add(photo(randomBytes(500), name: "p.jpg"))
                _ = try vault.add(note(Array("n".utf8), name: "n.txt"))
                return (store, vault.path, try vault.items())
            }()   // the vault (and its lock) is let go here
            let photoID = items.first { $0.kind == .photo }!.id
            // The planted directory holds a journal that would remove the photo.
            try writeBytes(Array("remove Meta/\(photoID).n11meta\nremove Photos/\(photoID).n11\n".utf8), to: victim + "/commit")
            try writeBytes(Array("precious".utf8), to: victim + "/keep.txt")
            let before = snapshot(victim)
            #expect(symlink(victim, vaultPath + "/.n11staging-planted") == 0)

            let reopened = try Vault.open(at: vaultPath, keyStore: store, forWriting: true)
            #expect(Set(try reopened.items().map(\.id)) == Set(items.map(\.id)))
            #expect(snapshot(victim) == before, "\(difference(before, snapshot(victim)))")
        }
    }

    @Test("export refuses a DIR, DIR/Photos or DIR/Notes that is a link or another user's, and writes nothing anywhere")
    func exportRefusesLinksAndForeignFolders() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir)

            let linkedRoot = dir + "/linked-root"
            #expect(symlink(w.victim, linkedRoot) == 0)
            expectArchiveError("unsafeDestination", kind: .configuration) { _ = try w.export(to: linkedRoot) }
            // A trailing slash (as shell completion adds) would make the kernel follow the link.
            expectArchiveError("unsafeDestination", kind: .configuration) { _ = try w.export(to: linkedRoot + "/") }
            #expect(snapshot(w.victim) == w.victimBefore, "\(difference(w.victimBefore, snapshot(w.victim)))")

            for folder in ["Photos", "Notes"] {
                let exportDir = dir + "/export-\(folder)"
                try makeDirectory(exportDir)
                #expect(symlink(w.victim, exportDir + "/" + folder) == 0)
                let before = snapshot(exportDir)
                let error = expectArchiveError("unsafeDestination", kind: .configuration) { _ = try w.export(to: exportDir) }
                #expect(error?.description.contains("\(exportDir)/\(folder)") == true, "\(String(describing: error))")
                #expect(snapshot(exportDir) == before)
                // Not even with --overwrite.
                expectArchiveError("unsafeDestination", kind: .configuration) { _ = try w.export(to: exportDir, overwrite: true) }
                #expect(snapshot(w.victim) == w.victimBefore, "\(difference(w.victimBefore, snapshot(w.victim)))")
            }

            let foreignFolder = dir + "/export-foreign"
            try makeDirectory(foreignFolder + "/Notes")
            #expect(chown(foreignFolder + "/Notes", Self.nobody, Self.nobody) == 0)
            expectArchiveError("unsafeDestination", kind: .configuration) { _ = try w.export(to: foreignFolder) }
            #expect(listing(of: foreignFolder + "/Notes").isEmpty && listing(of: foreignFolder) == ["Notes"])

            let foreignRoot = dir + "/foreign-root"
            try makeDirectory(foreignRoot)
            #expect(chown(foreignRoot, Self.nobody, Self.nobody) == 0)
            expectArchiveError("unsafeDestination", kind: .configuration) { _ = try w.export(to: foreignRoot) }
            #expect(listing(of: foreignRoot).isEmpty)
        }
    }

    @Test("a file named DIR/Photos or DIR/Notes is a conflict found before anything is moved")
    func fileInPlaceOfFolder() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir)
            for folder in ["Photos", "Notes"] {
                let exportDir = dir + "/export-\(folder)"
                try makeDirectory(exportDir)
                try writeBytes(Array("a file".utf8), to: exportDir + "/" + folder)
                let before = snapshot(exportDir)
                expectArchiveError("exportConflicts", kind: .outputExists) { _ = try w.export(to: exportDir) }
                #expect(snapshot(exportDir) == before, "\(difference(before, snapshot(exportDir)))")
                expectArchiveError("exportConflicts", kind: .outputExists) { _ = try w.export(to: exportDir, overwrite: true) }
                #expect(snapshot(exportDir) == before, "\(difference(before, snapshot(exportDir)))")
            }
        }
    }

    @Test("a file that appears after the conflict check is never replaced without --overwrite, and what was moved goes back")
    func fileAppearingDuringExport() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir)
            let exportDir = dir + "/export"
            // Both folders exist, so the export publishes file by file.
            try makeDirectory(exportDir + "/Photos")
            try makeDirectory(exportDir + "/Notes")
            try writeBytes(Array("unrelated".utf8), to: exportDir + "/Notes/other.txt")
            let before = snapshot(exportDir)
            let planted = exportDir + "/Photos/p.jpg"
            // Progress reports start after the conflict check: the file appears in the window.
            let plant = ArchiveProgress(interval: 0) { _ in
                if !exists(planted) { try? writeBytes(Array("made meanwhile".utf8), to: planted) }
            }
            expectArchiveError("exportConflicts", kind: .outputExists) { _ = try w.export(to: exportDir, progress: plant) }
            var expected = before
            expected["Photos/p.jpg"] = "file " + sha256Hex(Array("made meanwhile".utf8))
            #expect(snapshot(exportDir) == expected, "\(difference(expected, snapshot(exportDir)))")

            // With --overwrite it is replaced, as asked.
            _ = try w.export(to: exportDir, overwrite: true)
            #expect(try readBytes(planted) == w.photoBytes)
            #expect(try readBytes(exportDir + "/Notes/n.txt") == Array("hello".utf8))
            #expect(listing(of: exportDir).allSatisfy { !$0.hasPrefix(".n11") })
        }
    }

    @Test("two items with the same 254-byte name export as two files, each name within 255 bytes")
    func longNamesStayWithinNameMax() throws {
        try withTemporaryDirectory { dir in
            let (_, vault) = try makeVault(in: dir, name: "long")
            let name = String(repeating: "é", count: 125) + ".jpg"   // 250 + 4 = 254 bytes
            #expect(name.utf8.count == 254)
            let first = randomBytes(1000), second = randomBytes(1000)
            _ = try vault.add(photo(first, name: name))
            _ = try vault.add(photo(second, name: name))
            let archive = dir + "/long.nu11vlt"
            try createArchive(from: vault, mode: .portable, to: archive)
            _ = try ArchiveVerifier.verify(try unlock(archive, keyStore: nil), keyStore: nil)

            let exportDir = dir + "/export"
            let report = try ArchiveExporter.export(try unlock(archive, keyStore: nil), to: exportDir, keyStore: nil,
                                                    .init(overwrite: false, dryRun: false))
            #expect(try report.restored.count == 2)
            let names = listing(of: exportDir + "/Photos")
            #expect(names.count == 2 && names.contains(name), "\(names)")
            #expect(names.allSatisfy { $0.utf8.count <= 255 && $0.hasSuffix(".jpg") })
            let contents = Set(try names.map { try readBytes(exportDir + "/Photos/" + $0) })
            #expect(contents == [first, second])
        }
    }
}

