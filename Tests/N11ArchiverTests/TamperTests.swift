import Foundation
import Glibc
import Testing
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// One tamper case's world: a source vault with three items (a note, a 200 KiB photo that
/// has first, middle and last chunks, a small photo), an archive of it, and the
/// destinations a failed restore or export must leave exactly as they were: a vault in
/// another home holding one item, and an empty export directory.
final class TamperWorld {
    let dir: String
    let mode: ArchiveMode
    let store: KeyStore
    let vault: Vault
    let items: [ItemMetadata]
    let big: ItemMetadata
    let archivePath: String
    let bytes: [UInt8]
    let layout: ZipLayout
    let destStore: KeyStore
    let destVaultPath: String
    /// Another home's key store and its vault (with one item).
    let foreignStore: KeyStore
    let foreignVaultPath: String
    let exportDir: String

    static let bigSize = 200 << 10

    init(dir: String, mode: ArchiveMode = .portable) throws {
        self.dir = dir
        self.mode = mode
        (store, vault) = try makeVault(in: dir, name: "source")
        // Archive order is creation order: the big item comes last, so a restore that fails
        // on it has already staged the other two.
        let t0 = Date()
        // The note and the small photo have the same size, so their entries can swap contents.
        let n = try vault.add(note(Array(repeating: UInt8(ascii: "n"), count: 3000), name: "note.txt"), now: t0)
        let s = try vault.add(photo(randomBytes(3000), name: "small.jpg"), now: t0.addingTimeInterval(10))
        let b = try vault.add(photo(randomBytes(Self.bigSize), name: "big.jpg"), now: t0.addingTimeInterval(20))
        items = [n, s, b]
        big = b
        archivePath = dir + "/archive.nu11vlt"
        try createArchive(from: vault, mode: mode, to: archivePath, formatVersion: 2)   // its layout is version 2's (PackedArchiveTests: 3)
        bytes = try readBytes(archivePath)
        layout = try RawZip.parse(bytes)

        // Portable archives restore into a vault of another home (another key store);
        // secure ones only with the key store that made them, so into another vault of it.
        let (fs, fv) = try makeVault(in: dir, name: "dest")
        _ = try fv.add(photo(randomBytes(777), name: "existing.jpg"))
        foreignStore = fs
        foreignVaultPath = fv.path
        switch mode {
        case .portable:
            destStore = fs
            destVaultPath = fv.path
        case .secure:
            let sv = try Vault.open(at: dir + "/source/second-vault", keyStore: store, forWriting: true)
            _ = try sv.add(photo(randomBytes(777), name: "existing.jpg"))
            destStore = store
            destVaultPath = sv.path
        }
        exportDir = dir + "/export"
        try makeDirectory(exportDir)
        try makeDirectory(dir + "/variants")
    }

    var rawEntries: [RawZipEntry] { try! RawZip.entries(of: bytes) }
    var bigEntry: ZipLayoutEntry { layout.entry(named: EntryName.item(id: big.id, kind: .photo))! }
    var itemEntryNames: [String] { layout.entries.dropFirst(3).map(\.name) }

    /// Writes a variant of the archive and returns its path.
    func variant(_ name: String, _ bytes: [UInt8]) throws -> String {
        let path = dir + "/variants/" + name + ".nu11vlt"
        try writeBytes(bytes, to: path)
        return path
    }

    func variant(_ name: String, entries: [RawZipEntry]) throws -> String {
        try variant(name, RawZip.build(entries))
    }

    /// The archive with one byte XORed.
    func flipped(_ name: String, at offset: Int, mask: UInt8 = 0x01) throws -> String {
        var copy = bytes
        copy[offset] ^= mask
        return try variant(name, copy)
    }

    /// The entries with the contents of `i` and `j` exchanged, names and order kept.
    func swappingContents(_ i: Int, _ j: Int) -> [RawZipEntry] {
        var entries = rawEntries
        precondition(entries[i].data.count == entries[j].data.count)
        (entries[i].data, entries[j].data) = (entries[j].data, entries[i].data)
        (entries[i].crc, entries[j].crc) = (entries[j].crc, entries[i].crc)
        return entries
    }

    /// The archive with header.json replaced (CRC and sizes recomputed: only the bytes the
    /// format authenticates differ).
    func withHeader(_ name: String, _ edit: (String) -> String) throws -> String {
        var entries = rawEntries
        let text = String(decoding: entries[0].data, as: UTF8.self)
        let edited = edit(text)
        precondition(edited != text, "the edit changed nothing")
        entries[0] = .stored(EntryName.header, Array(edited.utf8))
        return try variant(name, entries: entries)
    }
}

/// Where a rejected archive must fail first.
enum FailureStage: String { case open, unlock, items }

/// Checks that `path` is rejected the same way by verify, restore (into the destination
/// vault, which must stay byte-identical) and export (whose directory must stay empty),
/// and that the first failure comes at `stage`. Returns the verify pipeline's error.
@discardableResult
func expectRejected(_ world: TamperWorld, _ path: String, _ expected: Set<String>, kind: FailureKind,
                    stage: FailureStage?, password: String = testPassword,
                    unlockStore: KeyStore? = nil, restoreInto: (store: KeyStore, vault: String)? = nil,
                    naming itemID: String? = nil, _ what: String = "",
                    sourceLocation: SourceLocation = #_sourceLocation) -> ArchiveError? {
    let label = what.isEmpty ? Path.lastComponent(of: path) : what
    let keyStore = unlockStore ?? (world.mode == .secure ? world.store : nil)
    var passwordRequests = 0
    func open() throws -> UnlockedArchive {
        let reader = try ArchiveReader(path: path)
        return try reader.unlock(password: { passwordRequests += 1; return try secret(password) }, keyStore: {
            guard let keyStore else { throw NoKeyStore() }
            return keyStore
        })
    }

    // 1. verify, step by step, to see where it fails.
    var reached = FailureStage.open
    let error = expectArchiveError(expected, kind: kind, "\(label) verify", sourceLocation: sourceLocation) {
        let reader = try ArchiveReader(path: path)
        reached = .unlock
        let archive = try reader.unlock(password: { passwordRequests += 1; return try secret(password) }, keyStore: {
            guard let keyStore else { throw NoKeyStore() }
            return keyStore
        })
        reached = .items
        _ = try ArchiveVerifier.verify(archive, keyStore: keyStore)
    }
    if let stage { #expect(reached == stage, "\(label): failed at \(reached), expected at \(stage)", sourceLocation: sourceLocation) }
    if reached == .open { #expect(passwordRequests == 0, "\(label): password asked before the header was checked", sourceLocation: sourceLocation) }
    if let error {
        #expect(!error.description.contains(password), "\(label): message contains the password", sourceLocation: sourceLocation)
        if let itemID { #expect(error.description.contains(itemID), "\(label): '\(error)' does not name item \(itemID)", sourceLocation: sourceLocation) }
    }

    // 2. restore into a vault holding one item: byte-identical afterwards.
    let (restoreStore, restorePath) = restoreInto ?? (world.destStore, world.destVaultPath)
    let vaultBefore = snapshot(restorePath)
    #expect(vaultBefore.keys.contains { $0.hasPrefix("Photos/") } && vaultBefore.keys.contains("Catalogue.sqlite"), "the destination vault should hold an item", sourceLocation: sourceLocation)
    expectArchiveError(expected, kind: kind, "\(label) restore", sourceLocation: sourceLocation) {
        let destination = try Vault.open(at: restorePath, keyStore: restoreStore, forWriting: true)
        _ = try ArchiveRestorer.restore(try open(), into: destination, .init(overwrite: false, dryRun: false))
    }
    let vaultAfter = snapshot(restorePath)
    #expect(vaultAfter == vaultBefore, "\(label): restore changed the vault: \(difference(vaultBefore, vaultAfter))", sourceLocation: sourceLocation)

    // 3. export into an empty directory: still empty afterwards.
    expectArchiveError(expected, kind: kind, "\(label) export", sourceLocation: sourceLocation) {
        _ = try ArchiveExporter.export(try open(), to: world.exportDir, keyStore: keyStore, .init(overwrite: false, dryRun: false))
    }
    #expect(listing(of: world.exportDir).isEmpty, "\(label): export left \(listing(of: world.exportDir))", sourceLocation: sourceLocation)
    return error
}

@Suite("Tampered and hostile archives: the right error, and nothing changes")
struct TamperTests {

    @Test("control: the untouched archive, and the same entries rewritten by the test ZIP writer, both verify")
    func control() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            #expect(world.layout.entries.map(\.name).prefix(3) == ["header.json", "header.mac", "manifest.json"])
            #expect(world.layout.entries.count == 6)
            #expect(world.layout.entries.allSatisfy { $0.method == 0 && $0.compressedSize == $0.uncompressedSize })
            #expect(world.bigEntry.compressedSize == TamperWorld.bigSize + 4 * 16, "200 KiB is four chunks")
            #expect(world.itemEntryNames == world.items.map { EntryName.item(id: $0.id, kind: $0.kind == .photo ? .photo : .note) })
            let rebuilt = try world.variant("rebuilt", entries: world.rawEntries)
            for path in [world.archivePath, rebuilt] {
                let archive = try unlock(path, keyStore: nil)
                #expect(try ArchiveVerifier.verify(archive, keyStore: nil).items == 3)
            }
            // And it restores (into a copy of nothing: a fresh vault of the destination home).
            let destination = try Vault.open(at: dir + "/fresh", keyStore: world.destStore, forWriting: true)
            #expect(try ArchiveRestorer.restore(try unlock(rebuilt, keyStore: nil), into: destination,
                                                .init(overwrite: false, dryRun: false)).restored.count == 3)
        }
    }

    // MARK: flipped bits

    @Test("a flipped bit in header.json, in place: the CRC catches it before any password, or the JSON is invalid")
    func headerBitFlipInPlace() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let header = world.layout.entries[0]
            let text = Array(world.bytes[header.dataOffset..<(header.dataOffset + header.compressedSize)])
            // A digit of the salt: XOR 1 keeps it a digit, so the JSON still parses.
            let saltStart = try #require(String(decoding: text, as: UTF8.self).range(of: "\"salt\":\"")).upperBound
            let saltOffset = String(decoding: text, as: UTF8.self).utf8.distance(from: String(decoding: text, as: UTF8.self).startIndex, to: saltStart)
            let digit = try #require((saltOffset..<(saltOffset + 32)).first { text[$0] >= 0x30 && text[$0] <= 0x39 })
            let path = try world.flipped("header-salt-flip", at: header.dataOffset + digit)
            // The entry's CRC-32 no longer matches: the header is read to its end, so libzip
            // checks the CRC and disk damage is reported as damage, before any password.
            // (An edit with a valid CRC is caught by the slot or header.mac instead: see below.)
            expectRejected(world, path, ["damaged"], kind: .damaged, stage: .open)

            // A flip that breaks the JSON: an invalid header.
            let broken = try world.flipped("header-brace-flip", at: header.dataOffset)
            expectRejected(world, broken, ["damaged", "notAnArchive"], kind: .damaged, stage: .open)
        }
    }

    @Test("header.json edited with a valid CRC: a changed slot salt is a wrong password; any other change fails header.mac")
    func headerEditedConsistently() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let salt = try world.withHeader("salt") { text in
                let range = text.range(of: "\"salt\":\"")!
                var chars = Array(text)
                let i = text.distance(from: text.startIndex, to: range.upperBound)
                chars[i] = chars[i] == "0" ? "1" : "0"
                return String(chars)
            }
            // The salt makes another KEK: the slot does not open, exactly as with a wrong password.
            let e = expectRejected(world, salt, ["wrongPassword"], kind: .authentication, stage: .unlock)
            #expect(e?.description.contains("header") == true)
            // The slot opens, but the content key's MAC over the header does not verify.
            let created = try world.withHeader("created") { $0.replacingOccurrences(of: "\"created\":\"20", with: "\"created\":\"19") }
            let m = expectRejected(world, created, ["damaged"], kind: .damaged, stage: .unlock)
            #expect(m?.description.contains("header.mac") == true, "\(String(describing: m))")
            let whitespace = try world.withHeader("whitespace") { "{ " + $0.dropFirst() }
            expectRejected(world, whitespace, ["damaged"], kind: .damaged, stage: .unlock)
        }
    }

    @Test("a secure archive: an edited header (valid CRC) or a flipped chunk bit is damage, and nothing changes")
    func secureTampering() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir, mode: .secure)
            let path = try world.withHeader("secure-whitespace") { "{ " + $0.dropFirst() }
            expectRejected(world, path, ["damaged"], kind: .damaged, stage: .unlock)
            // In place, so the CRC no longer matches: found when the archive is opened.
            let mac = try world.flipped("secure-header-mac", at: world.layout.entries[1].dataOffset + 20)
            expectRejected(world, mac, ["damaged"], kind: .damaged, stage: .open)
            // The device slot's wrap changed (consistent CRC): damage, not a missing key.
            let slot = try world.withHeader("secure-slot") { text in
                let range = text.range(of: "\"wrap\":\"")!
                var chars = Array(text)
                let i = text.distance(from: text.startIndex, to: range.upperBound) + 40
                chars[i] = chars[i] == "0" ? "1" : "0"
                return String(chars)
            }
            expectRejected(world, slot, ["damaged"], kind: .damaged, stage: .unlock)
            for (name, offset) in [("first", 7), ("middle", 65552 + 9), ("last", world.bigEntry.compressedSize - 20)] {
                let chunk = try world.flipped("secure-chunk-\(name)", at: world.bigEntry.dataOffset + offset)
                expectRejected(world, chunk, ["damaged"], kind: .damaged, stage: .items, naming: world.big.id, "secure chunk \(name)")
            }
            // Two same-sized item entries swap contents, names kept.
            expectRejected(world, try world.variant("secure-swapped", entries: world.swappingContents(3, 4)), ["damaged"],
                           kind: .damaged, stage: .items, naming: world.items[0].id)
        }
    }

    @Test("a flipped bit in header.mac: refused on opening (CRC) or at unlock (the MAC)")
    func headerMACBitFlip() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let entry = world.layout.entries[1]
            for (n, offset) in [0, 12, 31].enumerated() {
                let path = try world.flipped("header-mac-\(n)", at: entry.dataOffset + offset)
                // As for the header: the CRC no longer matches, so this is damage, found on opening.
                expectRejected(world, path, ["damaged"], kind: .damaged, stage: .open, "header.mac byte \(offset)")
            }
            // With a consistent CRC the slot opens and the MAC is what fails.
            var entries = world.rawEntries
            var mac = entries[1].data
            mac[20] ^= 0x80
            entries[1] = .stored(EntryName.headerMAC, mac)
            let consistent = try world.variant("header-mac-crc", entries: entries)
            expectRejected(world, consistent, ["damaged"], kind: .damaged, stage: .unlock)
            // A version 1 keywrap.bin in its place is refused as out of layout.
            entries[1] = .stored(EntryName.keyWrap, [UInt8](repeating: 1, count: 60))
            expectRejected(world, try world.variant("keywrap-in-v2", entries: entries), ["damaged"], kind: .damaged, stage: .open)
        }
    }

    @Test("a flipped bit in manifest.json (first byte, middle, tag) is damage found at unlock")
    func manifestBitFlip() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let entry = world.layout.entries[2]
            for (n, offset) in [0, entry.compressedSize / 2, entry.compressedSize - 1].enumerated() {
                let path = try world.flipped("manifest-\(n)", at: entry.dataOffset + offset)
                expectRejected(world, path, ["damaged"], kind: .damaged, stage: .unlock)
            }
        }
    }

    @Test("a flipped bit in the first, a middle, or the last chunk (or its tag) of an item is damage naming that item")
    func chunkBitFlips() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let entry = world.bigEntry
            let sealedChunk = 65536 + 16
            let offsets = [("first", 100), ("first-tag", sealedChunk - 1), ("middle", sealedChunk + 5000),
                           ("middle2", 2 * sealedChunk + 65536 + 3), ("last", 3 * sealedChunk + 10),
                           ("last-tag", entry.compressedSize - 1)]
            for (name, offset) in offsets {
                let path = try world.flipped("chunk-\(name)", at: entry.dataOffset + offset)
                expectRejected(world, path, ["damaged"], kind: .damaged, stage: .items, naming: world.big.id, "chunk \(name)")
            }
        }
    }

    @Test("a changed byte of an entry name in the central directory only (local header disagrees)")
    func centralDirectoryName() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            // The last UUID digit of the big item's name: still a valid layout name.
            let entry = world.bigEntry
            let last = entry.centralNameOffset + entry.name.utf8.count - ".n11".count - 1
            var copy = world.bytes
            copy[last] = copy[last] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
            expectRejected(world, try world.variant("cd-item-name", copy), ["damaged"], kind: .damaged, stage: nil)
            // The 'h' of header.json in the central directory.
            let header = world.layout.entries[0]
            let path = try world.flipped("cd-header-name", at: header.centralNameOffset, mask: 0x20)
            expectRejected(world, path, ["damaged", "notAnArchive"], kind: .damaged, stage: .open)
            // A flipped bit of the central directory's recorded size of an entry.
            let size = try world.flipped("cd-size", at: entry.centralOffset + 20)
            expectRejected(world, size, ["damaged"], kind: .damaged, stage: nil)
        }
    }

    // MARK: structure

    @Test("truncation at 16 offsets from 0 bytes to one byte short")
    func truncation() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let l = world.layout
            let big = world.bigEntry
            let offsets = [0, 1, 3, 4, 29, l.entries[0].dataOffset + 10, l.entries[1].dataOffset, l.entries[2].dataOffset + 20,
                           big.dataOffset + 70000, big.dataOffset + big.compressedSize - 1, l.centralDirectoryOffset,
                           l.centralDirectoryOffset + 60, l.endRecordOffset, l.endRecordOffset + 10, world.bytes.count - 2,
                           world.bytes.count - 1]
            #expect(Set(offsets).count == 16)
            for offset in offsets {
                let path = try world.variant("truncated-\(offset)", Array(world.bytes[0..<offset]))
                expectRejected(world, path, ["damaged", "notAnArchive"], kind: .damaged, stage: .open, "truncated to \(offset)")
            }
        }
    }

    @Test("an entry dropped (each of the six in turn)")
    func entryDropped() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let entries = world.rawEntries
            for index in entries.indices {
                var fewer = entries
                fewer.remove(at: index)
                let path = try world.variant("dropped-\(index)", entries: fewer)
                expectRejected(world, path, index == 0 ? ["notAnArchive", "damaged"] : ["damaged"], kind: .damaged,
                               stage: index < 3 ? .open : .unlock, "entry \(entries[index].nameString) dropped")
            }
        }
    }

    @Test("an entry duplicated (an item, the manifest, the header)")
    func entryDuplicated() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let entries = world.rawEntries
            for index in [4, 2, 0] {
                var more = entries
                more.insert(entries[index], at: index + 1)
                let path = try world.variant("duplicated-\(index)", entries: more)
                expectRejected(world, path, ["damaged"], kind: .damaged, stage: .open, "entry \(entries[index].nameString) duplicated")
            }
            // The duplicate at the end instead of next to the original.
            let path = try world.variant("duplicated-at-end", entries: entries + [entries[3]])
            expectRejected(world, path, ["damaged"], kind: .damaged, stage: .open)
        }
    }

    @Test("an item entry renamed in both local and central headers (last UUID digit)")
    func entryRenamed() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let entry = world.bigEntry
            let digit = entry.name.utf8.count - ".n11".count - 1
            var copy = world.bytes
            let replacement = copy[entry.localNameOffset + digit] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
            copy[entry.localNameOffset + digit] = replacement
            copy[entry.centralNameOffset + digit] = replacement
            let path = try world.variant("renamed", copy)
            expectRejected(world, path, ["damaged"], kind: .damaged, stage: .unlock)

            // Renamed to the other kind (Photos/ID.n11 → Notes/ID.n11note), same data.
            var entries = world.rawEntries
            let i = entries.firstIndex { $0.nameString == entry.name }!
            entries[i].name = Array(EntryName.item(id: world.big.id, kind: .note).utf8)
            expectRejected(world, try world.variant("renamed-kind", entries: entries), ["damaged"], kind: .damaged, stage: .unlock)
        }
    }

    @Test("an entry added (a new Photos/{UUID}.n11 at the end, or between items)")
    func entryAdded() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let extra = RawZipEntry.stored(EntryName.item(id: UUID().uuidString, kind: .photo), randomBytes(64))
            let appended = try world.variant("added-end", entries: world.rawEntries + [extra])
            expectRejected(world, appended, ["damaged"], kind: .damaged, stage: .unlock)
            var entries = world.rawEntries
            entries.insert(extra, at: 4)
            expectRejected(world, try world.variant("added-middle", entries: entries), ["damaged"], kind: .damaged, stage: .unlock)
        }
    }

    @Test("an entry swapped with the same-named entry of another archive (same vault, same password)")
    func entrySwappedBetweenArchives() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let otherPath = dir + "/other.nu11vlt"
            try createArchive(from: world.vault, mode: .portable, to: otherPath, formatVersion: 2)
            let other = try RawZip.entries(of: readBytes(otherPath))
            #expect(other.map(\.nameString) == world.rawEntries.map(\.nameString), "same vault: same entry names")

            // An item entry: same name, same size, another archive's content key.
            var entries = world.rawEntries
            let i = entries.firstIndex { $0.nameString == world.bigEntry.name }!
            #expect(entries[i].data.count == other[i].data.count)
            entries[i] = other[i]
            expectRejected(world, try world.variant("swapped-item", entries: entries), ["damaged"], kind: .damaged,
                           stage: .items, naming: world.big.id)

            // The manifest.
            entries = world.rawEntries
            entries[2] = other[2]
            expectRejected(world, try world.variant("swapped-manifest", entries: entries), ["damaged"], kind: .damaged, stage: .unlock)

            // Header, key wrap and manifest of the other archive with this one's items.
            entries = world.rawEntries
            entries.replaceSubrange(0..<3, with: other[0..<3])
            expectRejected(world, try world.variant("swapped-front", entries: entries), ["damaged"], kind: .damaged, stage: .items)
        }
    }

    @Test("two same-sized item entries swap contents, names kept: each entry's key is bound to its name")
    func entryContentsSwapped() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let entries = world.swappingContents(3, 4)
            expectRejected(world, try world.variant("contents-swapped", entries: entries), ["damaged"], kind: .damaged,
                           stage: .items, naming: world.items[0].id)
        }
    }

    @Test("two item entries' order swapped")
    func itemEntriesReordered() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            var entries = world.rawEntries
            entries.swapAt(3, 5)
            expectRejected(world, try world.variant("reordered", entries: entries), ["damaged"], kind: .damaged, stage: .unlock)
            entries = world.rawEntries
            entries.swapAt(1, 2)
            expectRejected(world, try world.variant("reordered-fixed", entries: entries), ["damaged"], kind: .damaged, stage: .open)
        }
    }

    // MARK: keys

    @Test("a wrong password is an authentication failure")
    func wrongPassword() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let e = expectRejected(world, world.archivePath, ["wrongPassword"], kind: .authentication, stage: .unlock,
                                   password: testPassword + "!")
            #expect(e?.description.contains("wrong password") == true)
            expectRejected(world, world.archivePath, ["wrongPassword"], kind: .authentication, stage: .unlock,
                           password: "Correct horse battery staple")
        }
    }

    @Test("a secure archive with a foreign key store: authentication, 'bound to the machine'")
    func secureForeignKeyStore() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir, mode: .secure)
            let e = expectRejected(world, world.archivePath, ["keyNotHere"], kind: .authentication, stage: .unlock,
                                   unlockStore: world.foreignStore, restoreInto: (world.foreignStore, world.foreignVaultPath))
            #expect(e?.description.contains("bound to the machine") == true, "\(String(describing: e))")
            // And the creating key store still opens it.
            #expect(try ArchiveVerifier.verify(try unlock(world.archivePath, keyStore: world.store), keyStore: world.store).items == 3)
        }
    }

    // MARK: hostile containers

    @Test("zip-slip and other out-of-layout names are rejected before anything is read",
          arguments: ["../evil", "/abs", "Photos/../../x.n11", "Photos/..\\..\\x.n11", "Photos/x.n11",
                      "photos/3F2A9C1B-0C4E-4A57-9E0B-6A1D2C3B4E5F.n11", "Photos/3f2a9c1b-0c4e-4a57-9e0b-6a1d2c3b4e5f.n11",
                      "Notes/3F2A9C1B-0C4E-4A57-9E0B-6A1D2C3B4E5F.n11", "Photos/", "extra.txt"])
    func hostileNames(name: String) throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            // Added as an extra entry, and in place of a real item entry.
            let added = try world.variant("name-added", entries: world.rawEntries + [.stored(name, randomBytes(40))])
            var entries = world.rawEntries
            entries[5].name = Array(name.utf8)
            let replaced = try world.variant("name-replaced", entries: entries)
            let beforeWithVariants = snapshot(dir)
            for path in [added, replaced] {
                expectRejected(world, path, ["damaged"], kind: .damaged, stage: .open, "entry '\(name)'")
            }
            let after = snapshot(dir)
            #expect(after == beforeWithVariants, "something was written: \(difference(beforeWithVariants, after))")
            #expect(!exists(dir + "/evil") && !exists(dir + "/variants/evil") && !exists("/abs") && !exists(dir + "/x.n11"))
        }
    }

    @Test("an entry marked as a symbolic link, or as a directory, is rejected")
    func linkAndDirectoryEntries() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            for (label, mode) in [("symlink", 0o120777), ("directory", 0o040700)] {
                var entries = world.rawEntries
                let i = entries.firstIndex { $0.nameString == world.bigEntry.name }!
                entries[i].externalAttributes = UInt32(mode) << 16
                let e = expectRejected(world, try world.variant(label, entries: entries), ["damaged"], kind: .damaged, stage: .open, label)
                #expect(e?.description.contains(label == "symlink" ? "link" : "directory") == true, "\(String(describing: e))")
            }
            // A symbolic link as an extra entry whose target points outside.
            var link = RawZipEntry.stored(EntryName.item(id: UUID().uuidString, kind: .photo), Array("../../../etc/passwd".utf8))
            link.externalAttributes = UInt32(0o120777) << 16
            expectRejected(world, try world.variant("symlink-extra", entries: world.rawEntries + [link]), ["damaged"], kind: .damaged, stage: .open)
        }
    }

    @Test("a DEFLATE-compressed entry is rejected (an item, and the header)")
    func compressedEntry() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            for index in [4, 0] {
                var entries = world.rawEntries
                entries[index] = .deflated(entries[index].nameString, entries[index].data)
                let e = expectRejected(world, try world.variant("deflated-\(index)", entries: entries), ["damaged"], kind: .damaged,
                                       stage: .open, "deflated \(entries[index].nameString)")
                #expect(e?.description.contains("compressed") == true, "\(String(describing: e))")
            }
        }
    }

    @Test("a header of format version 4 is unsupported; a version 2 header that says 1, or 3 in version 2's layout, is refused, before any password")
    func headerVersion4() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let path = try world.withHeader("version4") { text in
                precondition(text.hasSuffix(",\"version\":2}"))
                return String(text.dropLast(",\"version\":2}".count)) + ",\"version\":4}"
            }
            let e = expectRejected(world, path, ["unsupported"], kind: .damaged, stage: .open)
            #expect(e?.description.contains("version 4") == true, "\(String(describing: e))")
            let three = try world.withHeader("version3") { String($0.dropLast(",\"version\":2}".count)) + ",\"dependsOn\":[],\"version\":3}" }
            expectRejected(world, three, ["damaged"], kind: .damaged, stage: .open)
            let one = try world.withHeader("version1") { String($0.dropLast(",\"version\":2}".count)) + ",\"version\":1}" }
            expectRejected(world, one, ["damaged"], kind: .damaged, stage: .open)
        }
    }

    @Test("hostile Argon2id parameters (1 TiB of memory, 33 passes, parallelism 4) are refused fast, before deriving")
    func hostileKDFParameters() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let edits: [(String, String, String)] = [
                ("memory-1TiB", "\"memoryKiB\":8192", "\"memoryKiB\":1073741824"),
                ("memory-just-over", "\"memoryKiB\":8192", "\"memoryKiB\":1048577"),
                ("memory-too-small", "\"memoryKiB\":8192", "\"memoryKiB\":7"),
                ("ops-33", "\"opsLimit\":1", "\"opsLimit\":33"),
                ("ops-0", "\"opsLimit\":1", "\"opsLimit\":0"),
                ("parallelism-4", "\"parallelism\":1", "\"parallelism\":4"),
            ]
            for (label, from, to) in edits {
                let path = try world.withHeader(label) { text in
                    precondition(text.contains(from), "\(from) not in \(text)")
                    return text.replacingOccurrences(of: from, with: to)
                }
                let clock = ContinuousClock()
                let started = clock.now
                expectRejected(world, path, ["damaged"], kind: .damaged, stage: .open, label)
                #expect(clock.now - started < .seconds(2), "\(label): took \(clock.now - started)")
            }
        }
    }

    @Test("not a ZIP at all, and a missing archive")
    func notAnArchive() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let text = try world.variant("text", Array("hello, this is not a zip file\n".utf8))
            expectRejected(world, text, ["notAnArchive"], kind: .damaged, stage: .open)
            expectArchiveError("archiveMissing", kind: .missingInput) { _ = try ArchiveReader(path: dir + "/nope.nu11vlt") }
            // A valid ZIP with other entries.
            let other = try world.variant("other-zip", entries: [.stored("readme.txt", Array("hi".utf8)), .stored("a", []), .stored("b", [])])
            expectRejected(world, other, ["notAnArchive"], kind: .damaged, stage: .open)
        }
    }
}
