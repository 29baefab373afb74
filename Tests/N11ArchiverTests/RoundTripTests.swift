import Foundation
import Glibc
import Testing
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

@Suite("Archive round trips: create → unlock → verify → restore / export, both modes")
struct RoundTripTests {
    static let sizes = [0, 1, 65535, 65536, 65537, (3 << 20) + 5]

    /// Restores `archivePath` into a fresh vault: portable into a new home with its own key
    /// store, secure into another vault directory with the same key store. Returns the
    /// destination's key store and vault path.
    static func restoreIntoFreshVault(_ archivePath: String, mode: ArchiveMode, sourceStore: KeyStore,
                                      dir: String, expectedIDs: [String]) throws -> (KeyStore, String) {
        let store: KeyStore
        let vaultPath: String
        switch mode {
        case .portable:
            let home = N11Home(root: dir + "/restored-home")
            store = try KeyStore.create(in: home, pin: nil)
            vaultPath = home.defaultVaultPath
        case .secure:
            store = sourceStore
            vaultPath = dir + "/restored-vault"
        }
        let archive = try unlock(archivePath, keyStore: mode == .secure ? sourceStore : nil)
        let destination = try Vault.open(at: vaultPath, keyStore: store, forWriting: true)
        let report = try ArchiveRestorer.restore(archive, into: destination, .init(overwrite: false, dryRun: false))
        #expect(try report.restored.sorted() == expectedIDs.sorted())
        #expect(try report.replaced.isEmpty && report.skippedIdentical.isEmpty && report.skippedExpired.isEmpty)
        #expect(!report.dryRun)
        #expect(!listing(of: vaultPath).contains { $0.hasPrefix(".n11staging") }, "staging directory left behind")
        return (store, vaultPath)
    }

    /// Exports and checks that `Photos/` and `Notes/` hold exactly the originals.
    static func exportAndCompare(_ archivePath: String, mode: ArchiveMode, keyStore: KeyStore, dir: String,
                                 items: [ItemMetadata], plaintexts: [String: [UInt8]]) throws {
        let exportDir = dir + "/export"
        let archive = try unlock(archivePath, keyStore: mode == .secure ? keyStore : nil)
        let report = try ArchiveExporter.export(archive, to: exportDir, keyStore: mode == .secure ? keyStore : nil,
                                                .init(overwrite: false, dryRun: false))
        #expect(try report.restored.sorted() == items.map(\.id).sorted())
        var expectedFiles: Set<String> = []
        for item in items {
            let relative = (item.kind == .photo ? "Photos/" : "Notes/") + item.name
            expectedFiles.insert(relative)
            let bytes = try readBytes(exportDir + "/" + relative)
            #expect(bytes == plaintexts[item.id], "exported \(relative) differs")
        }
        let files = Set(snapshot(exportDir).filter { $0.value != "dir" }.keys)
        #expect(files == expectedFiles, "export holds \(files.sorted())")
        #expect(Set(listing(of: exportDir)).isSubset(of: ["Photos", "Notes"]), "export root: \(listing(of: exportDir))")
    }

    @Test("one photo of each boundary size, plus a note and a fade photo",
          arguments: [ArchiveMode.portable, .secure], RoundTripTests.sizes)
    func roundTrip(mode: ArchiveMode, size: Int) throws {
        for version in [2, 3] { try roundTrip(mode: mode, size: size, version: version) }
    }

    func roundTrip(mode: ArchiveMode, size: Int, version: Int) throws {
        try withTemporaryDirectory { dir in
            let (store, vault) = try makeVault(in: dir, name: "home")
            var plaintexts: [String: [UInt8]] = [:]
            let big = randomBytes(size)
            let a = try vault.add(photo(big, name: "photo-\(size).bin"))
            plaintexts[a.id] = big
            let text = Array("a note beside a \(size)-byte photo\n".utf8)
            let b = try vault.add(note(text, name: "note.txt"))
            plaintexts[b.id] = text
            let fade = randomBytes(1000)
            let c = try vault.add(photo(fade, name: "fade.jpg", compartment: .fade, expires: Date().addingTimeInterval(7 * 86400)))
            plaintexts[c.id] = fade
            let ids = [a.id, b.id, c.id]

            let archivePath = dir + "/out.nu11vlt"
            let created = try createArchive(from: vault, mode: mode, to: archivePath, formatVersion: version)
            #expect(try created.items == 3 && created.mode == mode && created.skippedExpired.isEmpty)
            #expect(created.plaintextBytes == Int64(size + text.count + fade.count))
            #expect(created.archiveBytes == Int64(try readBytes(archivePath).count))

            let reader = try ArchiveReader(path: archivePath)
            #expect(reader.header.mode == mode)
            #expect(reader.header.archiveIDHex == created.archiveID)
            if version == 2 { #expect(reader.itemEntryCount == 3) }
            #expect(reader.header.version == version)
            #expect(reader.header.slots.map(\.typeName) == (mode == .portable ? ["password"] : ["device"]))
            for kdf in reader.header.passwordKDFs { #expect(kdf.opsLimit == 1 && kdf.memoryKiB == 8192) }

            let archive = try unlock(archivePath, keyStore: mode == .secure ? store : nil)
            #expect(Set((try archive.items.all()).map(\.id)) == Set(ids))
            for item in (try archive.items.all()) {
                let expectedPayload = mode == .portable ? item.size : item.size + 28
                #expect(item.payloadSize == expectedPayload)
            }
            let verified = try ArchiveVerifier.verify(archive, keyStore: mode == .secure ? store : nil)
            #expect(verified.items == 3 && verified.plaintextBytes == created.plaintextBytes)

            let original = try storedItems(of: vault.path, keyStore: store)
            let (destStore, destPath) = try Self.restoreIntoFreshVault(archivePath, mode: mode, sourceStore: store, dir: dir, expectedIDs: ids)
            let destination = try Vault.open(at: destPath, keyStore: destStore, forWriting: false)
            try expectSameItems(original, try storedItems(of: destPath, keyStore: destStore), plaintexts: plaintexts, restoredVault: destination)

            try Self.exportAndCompare(archivePath, mode: mode, keyStore: store, dir: dir,
                                      items: Array(original.values), plaintexts: plaintexts)
        }
    }

    @Test("300 small notes (vault and fade) restore and export exactly", arguments: [ArchiveMode.portable, .secure], [2, 3])
    func manyNotes(mode: ArchiveMode, version: Int) throws {
        try withTemporaryDirectory { dir in
            let (store, vault) = try makeVault(in: dir, name: "home")
            var plaintexts: [String: [UInt8]] = [:]
            let expiry = Date().addingTimeInterval(3 * 86400)
            for i in 0..<300 {
                let text = Array("note \(i): ".utf8) + Array(randomBytes(i % 97).map { 0x41 + $0 % 26 })
                let isFade = i % 10 == 0
                let item = try vault.add(note(text, name: String(format: "note-%03d.txt", i),
                                              compartment: isFade ? .fade : .vault, expires: isFade ? expiry : nil))
                plaintexts[item.id] = text
            }
            let archivePath = dir + "/notes.nu11vlt"
            let created = try createArchive(from: vault, mode: mode, to: archivePath, formatVersion: version)
            #expect(created.items == 300)

            let archive = try unlock(archivePath, keyStore: mode == .secure ? store : nil)
            #expect(archive.items.count == 300)
            // Version 2: each note in its own entry; version 3: in a pack, at an offset.
            #expect((try archive.items.all()).allSatisfy { $0.kind == .note && $0.entry.hasPrefix(version == 2 ? "Notes/" : "Packs/")
                && ($0.offset == nil) == (version == 2) })
            let verified = try ArchiveVerifier.verify(archive, keyStore: mode == .secure ? store : nil)
            #expect(verified.items == 300)

            let original = try storedItems(of: vault.path, keyStore: store)
            #expect(original.count == 300)
            let (destStore, destPath) = try Self.restoreIntoFreshVault(archivePath, mode: mode, sourceStore: store, dir: dir,
                                                                       expectedIDs: Array(plaintexts.keys))
            let destination = try Vault.open(at: destPath, keyStore: destStore, forWriting: false)
            try expectSameItems(original, try storedItems(of: destPath, keyStore: destStore), plaintexts: plaintexts, restoredVault: destination)
            #expect(try storedItems(of: destPath, keyStore: destStore).values.filter { $0.compartment == .fade }.count == 30)

            try Self.exportAndCompare(archivePath, mode: mode, keyStore: store, dir: dir,
                                      items: Array(original.values), plaintexts: plaintexts)
        }
    }

    @Test("the backup compartment archives and restores on its own", arguments: [ArchiveMode.portable, .secure])
    func backupCompartment(mode: ArchiveMode) throws {
        try withTemporaryDirectory { dir in
            let (store, vault) = try makeVault(in: dir, name: "home")
            let kept = randomBytes(5000)
            let backupItem = try vault.add(photo(kept, name: "backup.jpg", compartment: .backup))
            _ = try vault.add(photo(randomBytes(10), name: "main.jpg"))
            let archivePath = dir + "/backup.nu11vlt"
            let created = try createArchive(from: vault, mode: mode, to: archivePath, compartments: [.backup])
            #expect(created.items == 1)
            let (destStore, destPath) = try Self.restoreIntoFreshVault(archivePath, mode: mode, sourceStore: store, dir: dir,
                                                                       expectedIDs: [backupItem.id])
            let restored = try storedItems(of: destPath, keyStore: destStore)
            #expect(restored[backupItem.id]?.compartment == .backup)
            let destination = try Vault.open(at: destPath, keyStore: destStore, forWriting: false)
            #expect(try plaintext(of: try #require(restored[backupItem.id]), in: destination) == kept)
        }
    }

    @Test("a vault with no items makes an archive with an empty manifest that restores to nothing",
          arguments: [ArchiveMode.portable, .secure], [2, 3])
    func emptyVault(mode: ArchiveMode, version: Int) throws {
        try withTemporaryDirectory { dir in
            let (store, vault) = try makeVault(in: dir, name: "home")
            let archivePath = dir + "/empty.nu11vlt"
            #expect(try createArchive(from: vault, mode: mode, to: archivePath, formatVersion: version).items == 0)
            let archive = try unlock(archivePath, keyStore: mode == .secure ? store : nil)
            #expect(archive.items.isEmpty)
            #expect(try ArchiveVerifier.verify(archive, keyStore: store).items == 0)
            _ = try Self.restoreIntoFreshVault(archivePath, mode: mode, sourceStore: store, dir: dir, expectedIDs: [])
        }
    }
}
