import Foundation
import Glibc
import Testing
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// Puts an item with a chosen ID into `vault` through VaultStaging (what a restore does),
/// so two vaults can hold different items of the same ID.
@discardableResult
func stageItem(in vault: Vault, id: String, kind: ItemKind, name: String, content: [UInt8],
               compartment: Compartment = .vault, expires: Date? = nil) throws -> String {
    let staging = try VaultStaging(vault: vault)
    try staging.stage(.init(id: id, kind: kind, compartment: compartment, name: name, created: Date(), expires: expires,
                            size: Int64(content.count), sha256: sha256Hex(content)), replaces: nil,
                      sealing: MemorySource(content))
    try staging.commit()
    return id
}

@Suite("ArchiveRestorer semantics: identical, conflicting, expired, dry run")
struct RestoreTests {

    /// Source vault with two items and a portable archive of it; a destination home.
    struct Setup {
        let sourceStore: KeyStore
        let sourceVault: Vault
        let photoItem: ItemMetadata
        let noteItem: ItemMetadata
        let photoBytes: [UInt8]
        let archivePath: String
        let destStore: KeyStore
        let destPath: String

        init(dir: String) throws {
            (sourceStore, sourceVault) = try makeVault(in: dir, name: "source")
            photoBytes = randomBytes(90_000)
            photoItem = try sourceVault.add(photo(photoBytes, name: "p.jpg"))
            noteItem = try sourceVault.add(note(Array("hello".utf8), name: "n.txt"))
            archivePath = dir + "/a.nu11vlt"
            try createArchive(from: sourceVault, mode: .portable, to: archivePath, formatVersion: 2)   // tests edit the photo's own entry
            let home = N11Home(root: dir + "/dest")
            destStore = try KeyStore.create(in: home, pin: nil)
            destPath = home.defaultVaultPath
        }

        func restore(_ path: String? = nil, overwrite: Bool = false, dryRun: Bool = false, now: Date = Date()) throws -> ArchiveRestorer.Report {
            let destination = try Vault.open(at: destPath, keyStore: destStore, forWriting: !dryRun)
            return try ArchiveRestorer.restore(try unlock(path ?? archivePath, keyStore: nil), into: destination,
                                               .init(overwrite: overwrite, dryRun: dryRun, now: now))
        }
    }

    @Test("restoring the same archive twice: the second run skips every identical item and changes nothing")
    func identicalSkipped() throws {
        try withTemporaryDirectory { dir in
            let s = try Setup(dir: dir)
            let first = try s.restore()
            #expect(try Set(first.restored) == [s.photoItem.id, s.noteItem.id])
            let before = snapshot(s.destPath)
            for overwrite in [false, true] {
                let again = try s.restore(overwrite: overwrite)
                #expect(try again.restored.isEmpty && again.replaced.isEmpty)
                #expect(try Set(again.skippedIdentical) == [s.photoItem.id, s.noteItem.id])
                #expect(again.plaintextBytes == 0)
                let after = snapshot(s.destPath)
                #expect(after == before, "\(difference(before, after))")
            }
        }
    }

    @Test("an item of the same ID and different content is a conflict (vault unchanged); overwrite replaces it")
    func conflictAndOverwrite() throws {
        try withTemporaryDirectory { dir in
            let s = try Setup(dir: dir)
            _ = try s.restore()

            // Another vault holds a different photo under the photo's ID, plus a new note.
            let (_, other) = try makeVault(in: dir, name: "other")
            let replacement = randomBytes(40_000)
            try stageItem(in: other, id: s.photoItem.id, kind: .photo, name: "replacement.jpg", content: replacement)
            let extra = try other.add(note(Array("new".utf8), name: "new.txt"))
            let otherArchive = dir + "/other.nu11vlt"
            try createArchive(from: other, mode: .portable, to: otherArchive)

            let before = snapshot(s.destPath)
            let e = expectArchiveError("conflicts", kind: .outputExists) { _ = try s.restore(otherArchive) }
            if case .conflicts(let ids)? = e { #expect(ids == FirstFew([s.photoItem.id])) }
            let after = snapshot(s.destPath)
            #expect(after == before, "a refused restore changed the vault: \(difference(before, after))")
            // Dry run reports the same conflict.
            expectArchiveError("conflicts", kind: .outputExists) { _ = try s.restore(otherArchive, dryRun: true) }

            let report = try s.restore(otherArchive, overwrite: true)
            #expect(try report.replaced == [s.photoItem.id])
            #expect(try report.restored == [extra.id])
            let items = try storedItems(of: s.destPath, keyStore: s.destStore)
            #expect(Set(items.keys) == [s.photoItem.id, s.noteItem.id, extra.id])
            let replaced = try #require(items[s.photoItem.id])
            #expect(replaced.name == "replacement.jpg" && replaced.size == Int64(replacement.count))
            let destination = try Vault.open(at: s.destPath, keyStore: s.destStore, forWriting: false)
            #expect(try plaintext(of: replaced, in: destination) == replacement)
            #expect(try plaintext(of: try #require(items[s.noteItem.id]), in: destination) == Array("hello".utf8))
        }
    }

    @Test("conflicts keep their count and the first three: a restore of millions of differing items holds no list of them")
    func conflictsCounted() {
        var ids = FirstFew()
        for n in 0..<100_000 { ids.append("ID\(n)") }
        #expect(ids.count == 100_000 && ids.first == ["ID0", "ID1", "ID2"])
        #expect(ArchiveError.conflicts(ids: ids).description.hasPrefix("100000 item(s) in the vault differ from the archive's items of the same ID (ID0, ID1, ID2, …)"))
        #expect(ArchiveError.conflicts(ids: FirstFew(["A", "B"])).description.contains("(A, B); nothing was restored"))
    }

    @Test("overwrite across kinds (a photo replaced by a note of the same ID) leaves no orphan content file")
    func overwriteAcrossKinds() throws {
        try withTemporaryDirectory { dir in
            let s = try Setup(dir: dir)
            _ = try s.restore()
            let (_, other) = try makeVault(in: dir, name: "other")
            try stageItem(in: other, id: s.photoItem.id, kind: .note, name: "now-a-note.txt", content: Array("text".utf8))
            let otherArchive = dir + "/other.nu11vlt"
            try createArchive(from: other, mode: .portable, to: otherArchive)
            let report = try s.restore(otherArchive, overwrite: true)
            #expect(try report.replaced == [s.photoItem.id])
            #expect(!exists(s.destPath + "/Photos/\(s.photoItem.id).n11"), "the old photo's content file is left behind")
            #expect(exists(s.destPath + "/Notes/\(s.photoItem.id).n11note"))
            let items = try storedItems(of: s.destPath, keyStore: s.destStore)
            #expect(items[s.photoItem.id]?.kind == .note)
            // And the vault still opens for writing cleanly (no leftovers to clean up).
            let before = snapshot(s.destPath)
            _ = try Vault.open(at: s.destPath, keyStore: s.destStore, forWriting: true)
            #expect(snapshot(s.destPath) == before)
        }
    }

    @Test("fade items that expired since the archive was made are skipped by restore and export")
    func expiredInArchiveSkipped() throws {
        try withTemporaryDirectory { dir in
            let (_, vault) = try makeVault(in: dir, name: "source")
            let t0 = Date()
            let lasting = try vault.add(photo(randomBytes(10), name: "lasting.jpg"))
            let fading = try vault.add(photo(randomBytes(10), name: "fading.jpg", compartment: .fade, expires: t0.addingTimeInterval(3600)))
            let archivePath = dir + "/a.nu11vlt"
            #expect(try createArchive(from: vault, mode: .portable, to: archivePath, now: t0).items == 2)

            let later = t0.addingTimeInterval(7200)
            let store = try KeyStore.create(in: N11Home(root: dir + "/dest"), pin: nil)
            let destination = try Vault.open(at: dir + "/dest/vault", keyStore: store, forWriting: true)
            let report = try ArchiveRestorer.restore(try unlock(archivePath, keyStore: nil), into: destination,
                                                     .init(overwrite: false, dryRun: false, now: later))
            #expect(try report.restored == [lasting.id])
            #expect(try report.skippedExpired == [fading.id])
            #expect(Set(try storedItems(of: dir + "/dest/vault", keyStore: store).keys) == [lasting.id])

            let exported = try ArchiveExporter.export(try unlock(archivePath, keyStore: nil), to: dir + "/export", keyStore: nil,
                                                      .init(overwrite: false, dryRun: false, now: later))
            #expect(try exported.skippedExpired == [fading.id])
            #expect(exists(dir + "/export/Photos/lasting.jpg") && !exists(dir + "/export/Photos/fading.jpg"))
        }
    }

    @Test("dry runs write nothing: restore into an existing vault, export into an existing or missing directory")
    func dryRunWritesNothing() throws {
        try withTemporaryDirectory { dir in
            let s = try Setup(dir: dir)
            // The destination vault exists with one item of its own.
            do {
                let destination = try Vault.open(at: s.destPath, keyStore: s.destStore, forWriting: true)
                _ = try destination.add(photo(randomBytes(50), name: "mine.jpg"))
            }
            let before = snapshot(s.destPath)
            let report = try s.restore(dryRun: true)
            #expect(report.dryRun)
            #expect(try Set(report.restored) == [s.photoItem.id, s.noteItem.id])
            #expect(report.plaintextBytes == Int64(s.photoBytes.count + 5))
            let after = snapshot(s.destPath)
            #expect(after == before, "\(difference(before, after))")

            let exportDir = dir + "/export"
            try makeDirectory(exportDir)
            let exported = try ArchiveExporter.export(try unlock(s.archivePath, keyStore: nil), to: exportDir, keyStore: nil,
                                                      .init(overwrite: false, dryRun: true))
            #expect(try exported.dryRun && exported.restored.count == 2)
            #expect(listing(of: exportDir).isEmpty)
            _ = try ArchiveExporter.export(try unlock(s.archivePath, keyStore: nil), to: dir + "/missing/export", keyStore: nil,
                                           .init(overwrite: false, dryRun: true))
            #expect(!exists(dir + "/missing"))
        }
    }

    @Test("a dry run still verifies every item: a damaged chunk fails it")
    func dryRunDetectsDamage() throws {
        try withTemporaryDirectory { dir in
            let s = try Setup(dir: dir)
            var bytes = try readBytes(s.archivePath)
            let entry = try #require(try RawZip.parse(bytes).entry(named: EntryName.item(id: s.photoItem.id, kind: .photo)))
            bytes[entry.dataOffset + 70_000] ^= 0x10
            let damaged = dir + "/damaged.nu11vlt"
            try writeBytes(bytes, to: damaged)
            _ = try Vault.open(at: s.destPath, keyStore: s.destStore, forWriting: true)   // make the vault exist
            let before = snapshot(s.destPath)
            expectArchiveError("damaged", kind: .damaged) { _ = try s.restore(damaged, dryRun: true) }
            expectArchiveError("damaged", kind: .damaged) {
                _ = try ArchiveExporter.export(try unlock(damaged, keyStore: nil), to: dir + "/x", keyStore: nil, .init(overwrite: false, dryRun: true))
            }
            #expect(snapshot(s.destPath) == before)
            #expect(!exists(dir + "/x"))
        }
    }

    @Test("export refuses to overwrite existing files unless asked, and then replaces them")
    func exportConflicts() throws {
        try withTemporaryDirectory { dir in
            let s = try Setup(dir: dir)
            let exportDir = dir + "/export"
            try makeDirectory(exportDir + "/Photos")
            try writeBytes(Array("old".utf8), to: exportDir + "/Photos/p.jpg")
            let before = snapshot(exportDir)
            expectArchiveError("exportConflicts", kind: .outputExists) {
                _ = try ArchiveExporter.export(try unlock(s.archivePath, keyStore: nil), to: exportDir, keyStore: nil,
                                               .init(overwrite: false, dryRun: false))
            }
            #expect(snapshot(exportDir) == before)
            _ = try ArchiveExporter.export(try unlock(s.archivePath, keyStore: nil), to: exportDir, keyStore: nil,
                                           .init(overwrite: true, dryRun: false))
            #expect(try readBytes(exportDir + "/Photos/p.jpg") == s.photoBytes)
            #expect(try readBytes(exportDir + "/Notes/n.txt") == Array("hello".utf8))
        }
    }

    @Test("a failed export into a directory that did not exist leaves nothing behind")
    func failedExportIntoMissingDirectory() throws {
        try withTemporaryDirectory { dir in
            let s = try Setup(dir: dir)
            var bytes = try readBytes(s.archivePath)
            let entry = try #require(try RawZip.parse(bytes).entry(named: EntryName.item(id: s.photoItem.id, kind: .photo)))
            bytes[entry.dataOffset + entry.compressedSize - 1] ^= 0x01
            let damaged = dir + "/damaged.nu11vlt"
            try writeBytes(bytes, to: damaged)
            expectArchiveError("damaged", kind: .damaged) {
                _ = try ArchiveExporter.export(try unlock(damaged, keyStore: nil), to: dir + "/new-export", keyStore: nil,
                                               .init(overwrite: false, dryRun: false))
            }
            #expect(!exists(dir + "/new-export"), "left: \(listing(of: dir + "/new-export"))")
        }
    }
}
