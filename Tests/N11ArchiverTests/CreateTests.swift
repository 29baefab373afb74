import Foundation
import Glibc
import Testing
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

@Suite("ArchiveCreator guarantees: complete output or none, damaged items, expiry")
struct CreateTests {

    @Test("an existing output is refused without replaceExisting, untouched, before any password is asked; replaced with it",
          arguments: [ArchiveMode.portable, .secure])
    func outputExists(mode: ArchiveMode) throws {
        try withTemporaryDirectory { dir in
            let (_, vault) = try makeVault(in: dir, name: "home")
            _ = try vault.add(photo(randomBytes(1234), name: "a.jpg"))
            let output = dir + "/out.nu11vlt"
            let first = try createArchive(from: vault, mode: mode, to: output)
            let before = try readBytes(output)

            var asked = 0
            let e = expectArchiveError("outputExists", kind: .outputExists) {
                _ = try ArchiveCreator.create(from: vault, .init(mode: mode, compartments: [.vault, .fade], output: output,
                                                                 replaceExisting: false, kdf: fastKDF)) {
                    asked += 1
                    return try secret(testPassword)
                }
            }
            #expect(e?.description.contains(output) == true)
            #expect(asked == 0, "the password was asked although nothing could be written")
            #expect(try readBytes(output) == before)
            #expect(listing(of: dir) == ["home", "out.nu11vlt"], "\(listing(of: dir))")

            // A plain file that is not an archive is protected the same way.
            let other = dir + "/notes.txt"
            try writeBytes(Array("mine".utf8), to: other)
            expectArchiveError("outputExists", kind: .outputExists) { try createArchive(from: vault, mode: mode, to: other) }
            #expect(try readBytes(other) == Array("mine".utf8))

            // With replaceExisting the old archive is replaced by a new, complete one.
            let second = try createArchive(from: vault, mode: mode, to: output, replaceExisting: true)
            #expect(second.archiveID != first.archiveID)
            #expect(try ArchiveReader(path: output).header.archiveIDHex == second.archiveID)
            #expect(listing(of: dir) == ["home", "notes.txt", "out.nu11vlt"], "temp files left: \(listing(of: dir))")
        }
    }

    enum Damage: String, CaseIterable { case ciphertextByte, tagByte, truncated, removed }

    @Test("a damaged vault item stops create: vaultItemDamaged names it, no output, no temp files",
          arguments: [ArchiveMode.portable, .secure], Damage.allCases)
    func damagedVaultItem(mode: ArchiveMode, damage: Damage) throws {
        try withTemporaryDirectory { dir in
            let (_, vault) = try makeVault(in: dir, name: "home")
            let created = Date()
            // Three items; the damaged one is in the middle of the archive order, so the one
            // before it was already written when the damage is found.
            var items: [ItemMetadata] = []
            for (i, size) in [70000, 150_000, 5000].enumerated() {
                items.append(try vault.add(photo(randomBytes(size), name: "p\(i).jpg"), now: created.addingTimeInterval(Double(i) * 10)))
            }
            let victim = items[1]
            let contentPath = vault.contentPath(of: victim)
            var content = try readBytes(contentPath)
            switch damage {
            case .ciphertextByte: content[12 + 100_000] ^= 0x04
            case .tagByte: content[content.count - 3] ^= 0x80
            case .truncated: content.removeLast(1000)
            case .removed: break
            }
            if damage == .removed { unlink(contentPath) } else { try writeBytes(content, to: contentPath) }

            let outDir = dir + "/out"
            try makeDirectory(outDir)
            let output = outDir + "/archive.nu11vlt"
            // A missing file is said to be missing, not to have failed authentication.
            let error = expectArchiveError(damage == .removed ? "vault" : "vaultItemDamaged", kind: .damaged, "\(mode) \(damage)") {
                try createArchive(from: vault, mode: mode, to: output)
            }
            if case .vaultItemDamaged(let id, let path)? = error {
                #expect(id == victim.id)
                #expect(path == contentPath)
            }
            if case .vault(.contentMissing(let id, let path))? = error {
                #expect(id == victim.id && path == contentPath)
            }
            #expect(error?.description.contains(victim.id) == true)
            #expect(!exists(output))
            #expect(listing(of: outDir).isEmpty, "left in the output directory: \(listing(of: outDir))")
        }
    }

    @Test("expired fade items are left out and reported; unexpired fade items keep their expiry through restore",
          arguments: [ArchiveMode.portable, .secure])
    func fadeExpiry(mode: ArchiveMode) throws {
        try withTemporaryDirectory { dir in
            let (store, vault) = try makeVault(in: dir, name: "home")
            let t0 = Date()
            let kept = try vault.add(photo(randomBytes(100), name: "kept.jpg"))
            let soon = try vault.add(note(Array("gone soon".utf8), name: "soon.txt", compartment: .fade, expires: t0.addingTimeInterval(3600)))
            let laterBytes = randomBytes(2000)
            let later = try vault.add(photo(laterBytes, name: "later.jpg", compartment: .fade, expires: t0.addingTimeInterval(30 * 86400)))
            let stored = try storedItems(of: vault.path, keyStore: store)

            let now = t0.addingTimeInterval(2 * 3600)
            let output = dir + "/fade.nu11vlt"
            let report = try createArchive(from: vault, mode: mode, to: output, now: now)
            #expect(report.items == 2)
            #expect(try report.skippedExpired == [soon.id])
            #expect(report.plaintextBytes == 100 + 2000)

            let archive = try unlock(output, keyStore: mode == .secure ? store : nil)
            #expect(Set((try archive.items.all()).map(\.id)) == [kept.id, later.id])
            let entry = try #require((try archive.items.all()).first { $0.id == later.id })
            #expect(entry.compartment == .fade)
            #expect(entry.expires == stored[later.id]?.expires)
            #expect((try archive.items.all()).first { $0.id == kept.id }?.expires == nil)

            let destStore = mode == .secure ? store : try KeyStore.create(in: N11Home(root: dir + "/other"), pin: nil)
            let destination = try Vault.open(at: dir + "/restored", keyStore: destStore, forWriting: true)
            let restored = try ArchiveRestorer.restore(archive, into: destination, .init(overwrite: false, dryRun: false, now: now))
            #expect(try Set(restored.restored) == [kept.id, later.id])
            let back = try storedItems(of: dir + "/restored", keyStore: destStore)
            #expect(back[later.id]?.expires == stored[later.id]?.expires)
            #expect(back[later.id]?.compartment == .fade)
            #expect(try plaintext(of: try #require(back[later.id]), in: destination) == laterBytes)

            // Only the vault compartment: fade items are not part of it, so not "skipped".
            let vaultOnly = try createArchive(from: vault, mode: mode, to: dir + "/vault-only.nu11vlt", compartments: [.vault], now: now)
            #expect(vaultOnly.items == 1 && vaultOnly.skippedExpired.isEmpty)
        }
    }

    @Test("no plaintext, item name or password in the archive bytes", arguments: [ArchiveMode.portable, .secure])
    func nothingReadableInTheArchive(mode: ArchiveMode) throws {
        try withTemporaryDirectory { dir in
            let (_, vault) = try makeVault(in: dir, name: "home")
            let marker = randomBytes(32)
            var big = randomBytes(200_000)
            big.replaceSubrange(100_000..<100_032, with: marker)
            let markerHex = marker.hex
            _ = try vault.add(photo(big, name: "holiday-\(markerHex.prefix(12)).jpg"))
            _ = try vault.add(note(Array("door code \(markerHex)".utf8), name: "codes-\(markerHex.suffix(12)).txt"))
            let output = dir + "/a.nu11vlt"
            try createArchive(from: vault, mode: mode, to: output)
            let bytes = try readBytes(output)
            for needle in [marker, Array(markerHex.utf8), Array("holiday-".utf8), Array("codes-".utf8), Array("door code".utf8),
                           Array(testPassword.utf8)] {
                #expect(!contains(bytes, needle), "archive contains \(String(decoding: needle.prefix(16), as: UTF8.self))…")
            }
        }
    }
}
