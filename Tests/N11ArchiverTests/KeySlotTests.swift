import Foundation
import Testing
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// Version 2 archives (FORMAT.md §4): password and P-256 recipient slots, which key opens
/// what, and tampering with the slot list.
@Suite("Key slots: recipients, passwords, and the slot list under tampering")
struct KeySlotTests {
    /// A vault with two items, and identities A and B.
    struct World {
        let dir: String
        let vault: Vault
        let a: P256PrivateKey, b: P256PrivateKey
        let items: [ItemMetadata]

        init(dir: String) throws {
            self.dir = dir
            (_, vault) = try makeVault(in: dir, name: "source")
            items = [try vault.add(note(Array("a note\n".utf8), name: "n.txt")),
                     try vault.add(photo(randomBytes(70_000), name: "p.jpg"))]
            a = try P256PrivateKey.generate()
            b = try P256PrivateKey.generate()
        }

        /// Makes an archive for these passwords and recipients; counts password requests.
        @discardableResult
        func archive(_ name: String, passwords: [String], recipients: [P256PublicKey]) throws -> String {
            let path = dir + "/" + name + ".nu11vlt"
            _ = try ArchiveCreator.create(from: vault, .init(mode: .portable, compartments: [.vault], output: path,
                                                             replaceExisting: false, kdf: fastKDF)) {
                ArchiveAccess(passwords: try passwords.map { try secret($0) }, recipients: recipients, kdf: fastKDF)
            }
            return path
        }
    }

    /// Unlocks with these identities and (if given) this password; returns how many times
    /// the password was asked for.
    static func open(_ path: String, identities: [P256PrivateKey], password: String?) throws -> (UnlockedArchive, Int) {
        var asked = 0
        let archive = try ArchiveReader(path: path).unlock(password: {
            asked += 1
            return try password.map { try secret($0) }
        }, keyStore: { throw NoKeyStore() }, identities: { identities })
        return (archive, asked)
    }

    @Test("an archive for two recipients and a password opens with either identity (no password asked) or with the password")
    func whoOpensWhat() throws {
        try withTemporaryDirectory { dir in
            let world = try World(dir: dir)
            let path = try world.archive("mixed", passwords: [testPassword], recipients: [world.a.publicKey, world.b.publicKey])
            let header = try ArchiveReader(path: path).header
            #expect(header.version == ArchiveHeader.currentVersion)
            #expect(header.slots.map(\.typeName) == ["password", "p256", "p256"])
            for identity in [world.a, world.b] {
                let (archive, asked) = try Self.open(path, identities: [identity], password: nil)
                #expect(asked == 0)
                #expect(try ArchiveVerifier.verify(archive, keyStore: nil).items == 2)
            }
            let (archive, asked) = try Self.open(path, identities: [try P256PrivateKey.generate()], password: testPassword)
            #expect(asked == 1)
            #expect(try ArchiveVerifier.verify(archive, keyStore: nil).items == 2)
            // Neither: the message says what the archive has and what would open it.
            let error = expectArchiveError("noKeyOpens", kind: .authentication) {
                _ = try Self.open(path, identities: [try P256PrivateKey.generate()], password: nil)
            }
            #expect(error?.description.contains("2 recipient slot(s)") == true, "\(String(describing: error))")
            #expect(error?.description.contains("1 password slot(s)") == true, "\(String(describing: error))")
            #expect(error?.hint?.contains("--identity") == true)
            expectArchiveError("wrongPassword", kind: .authentication) { _ = try Self.open(path, identities: [], password: "wrong") }
        }
    }

    @Test("a recipients-only archive restores with the identity and nothing else; without it nothing is asked and nothing opens")
    func recipientOnly() throws {
        try withTemporaryDirectory { dir in
            let world = try World(dir: dir)
            let path = try world.archive("write-only", passwords: [], recipients: [world.a.publicKey])
            let (archive, asked) = try Self.open(path, identities: [world.a], password: nil)
            #expect(asked == 0)
            let (_, destination) = try makeVault(in: dir, name: "new-machine")
            let report = try ArchiveRestorer.restore(archive, into: destination, .init(overwrite: false, dryRun: false))
            #expect(try report.restored.count == 2)
            for item in world.items {
                let restored = try #require(try destination.items().first { $0.id == item.id })
                #expect(try plaintext(of: restored, in: destination) == (try plaintext(of: item, in: world.vault)))
            }
            var tries = 0
            expectArchiveError("noKeyOpens", kind: .authentication) {
                _ = try ArchiveReader(path: path).unlock(password: { tries += 1; return try secret(testPassword) },
                                                         keyStore: { throw NoKeyStore() }, identities: { [world.b] })
            }
            #expect(tries == 0, "a recipients-only archive never asks for a password")
        }
    }

    /// The archive with its header replaced by `slots` (same ID, mode and time) and header.mac kept.
    static func withSlots(_ path: String, _ name: String, _ edit: ([ArchiveHeader.KeySlot]) -> [ArchiveHeader.KeySlot]) throws -> String {
        let header = try ArchiveReader(path: path).header
        let changed = try ArchiveHeader(mode: header.mode, archiveID: header.archiveID, created: header.created,
                                        slots: edit(header.slots), version: header.version, dependsOn: header.dependsOn,
                                        signer: header.signer)
        var entries = try RawZip.entries(of: try readBytes(path))
        entries[0] = .stored(EntryName.header, changed.bytes)
        let out = Path.directory(of: path) + "/" + name + ".nu11vlt"
        try writeBytes(try RawZip.build(entries), to: out)
        return out
    }

    @Test("the slot list is authenticated: a slot removed, added, reordered or spliced from another archive is damage")
    func slotListTamper() throws {
        try withTemporaryDirectory { dir in
            let world = try World(dir: dir)
            let path = try world.archive("mixed", passwords: [testPassword], recipients: [world.a.publicKey, world.b.publicKey])
            let other = try world.archive("other", passwords: [testPassword], recipients: [world.a.publicKey])
            let otherSlots = try ArchiveReader(path: other).header.slots
            let variants: [(String, ([ArchiveHeader.KeySlot]) -> [ArchiveHeader.KeySlot])] = [
                ("removed-b", { Array($0.prefix(2)) }),
                ("removed-password", { Array($0.dropFirst()) }),
                ("added", { $0 + [$0[1]] }),
                ("reordered", { [$0[0], $0[2], $0[1]] }),
                ("spliced", { [$0[0], otherSlots[1], $0[2]] }),
                ("stranger-added", { slots in slots + [.recipient(wrap: try! AppleECIES.seal(try! SecureBytes(randomCount: 32),
                                                                                               to: try! P256PrivateKey.generate().publicKey))] }),
            ]
            for (name, edit) in variants {
                let variant = try Self.withSlots(path, name, edit)
                // Whatever opens a slot, the MAC over the header no longer verifies.
                for (identities, password) in [([world.a], nil), ([world.b], nil), ([], testPassword)] as [([P256PrivateKey], String?)] {
                    let label = "\(name) with \(identities.isEmpty ? "password" : "identity")"
                    let error = expectArchiveError(["damaged", "noKeyOpens"], kind: nil, label) {
                        _ = try Self.open(variant, identities: identities, password: password)
                    }
                    // A slot that is gone cannot open; one that is there opens and fails the MAC.
                    if error?.caseName == "damaged" {
                        #expect(error?.description.contains("header.mac") == true, "\(label): \(String(describing: error))")
                    }
                }
            }
            // The spliced slot opens (it is A's, from the other archive) but its content key is
            // not this archive's: damage, never the other archive's items.
            let spliced = try Self.withSlots(path, "spliced-only", { _ in [otherSlots[1]] })
            expectArchiveError("damaged", kind: .damaged) { _ = try Self.open(spliced, identities: [world.a], password: nil) }
        }
    }

    @Test("a changed byte in a recipient slot's wrap: that slot no longer opens (recipient slots are anonymous, so it reads as not ours)")
    func slotWrapChanged() throws {
        try withTemporaryDirectory { dir in
            let world = try World(dir: dir)
            let path = try world.archive("for-a", passwords: [], recipients: [world.a.publicKey])
            for offset in [0, 10, 64, 70, 100, 112] {
                let variant = try Self.withSlots(path, "flip-\(offset)") { slots in
                    var wrap = slots[0].wrap
                    wrap[offset] ^= 0x01
                    return [.recipient(wrap: wrap)]
                }
                expectArchiveError(["noKeyOpens", "damaged"], kind: nil, "offset \(offset)") {
                    _ = try Self.open(variant, identities: [world.a], password: nil)
                }
            }
        }
    }

    @Test("headers the reader refuses: no slots, a device slot in a portable archive, 5 password slots, a top-level kdf in version 2")
    func slotRules() throws {
        let id = [UInt8](repeating: 7, count: 16)
        let kdf = ArchiveHeader.KDF(opsLimit: 1, memoryKiB: 8192, salt: [UInt8](repeating: 1, count: 16))
        let password = ArchiveHeader.KeySlot.password(kdf, wrap: [UInt8](repeating: 2, count: 60))
        #expect(throws: FormatError.self) { _ = try ArchiveHeader(mode: .portable, archiveID: id, created: Date(), slots: []) }
        #expect(throws: FormatError.self) {
            _ = try ArchiveHeader(mode: .portable, archiveID: id, created: Date(), slots: [.device(wrap: [UInt8](repeating: 2, count: 60))])
        }
        #expect(throws: FormatError.self) { _ = try ArchiveHeader(mode: .secure, archiveID: id, created: Date(), slots: [password]) }
        #expect(throws: FormatError.self) {
            _ = try ArchiveHeader(mode: .portable, archiveID: id, created: Date(), slots: Array(repeating: password, count: 5))
        }
        let four = try ArchiveHeader(mode: .portable, archiveID: id, created: Date(), slots: Array(repeating: password, count: 4))
        #expect(try ArchiveHeader(parsing: four.bytes) == four)
        let text = String(decoding: four.bytes, as: UTF8.self)
        let withKDF = text.replacingOccurrences(of: "\"mode\":", with: "\"kdf\":{\"algorithm\":\"argon2id\",\"memoryKiB\":8192,\"opsLimit\":1,\"parallelism\":1,\"salt\":\"\(String(repeating: "01", count: 16))\",\"version\":19},\"mode\":")
        #expect(throws: FormatError.self) { _ = try ArchiveHeader(parsing: Array(withKDF.utf8)) }
        let unknownType = text.replacingOccurrences(of: "\"type\":\"password\"", with: "\"type\":\"x25519\"")
        #expect(throws: FormatError.self) { _ = try ArchiveHeader(parsing: Array(unknownType.utf8)) }
    }
}

@Suite("Rekey: new slots, the same content, byte for byte")
struct RekeyTests {
    /// Names and data of every entry after the first two.
    static func content(_ path: String) throws -> [RawZipEntry] { Array(try RawZip.entries(of: try readBytes(path)).dropFirst(2)) }

    @Test("adding a recipient, then removing the password: every other entry is byte-identical, and who opens it changes")
    func addThenRemove() throws {
        try withTemporaryDirectory { dir in
            let world = try KeySlotTests.World(dir: dir)
            let path = try world.archive("a", passwords: [testPassword], recipients: [])
            let before = try Self.content(path)
            let (unlocked, _) = try KeySlotTests.open(path, identities: [], password: testPassword)
            let report = try ArchiveRekeyer.rekey(unlocked, .init(add: ArchiveAccess(recipients: [world.a.publicKey], kdf: fastKDF),
                                                                  removePasswords: false, removeRecipients: false))
            #expect(report.slots == ["password", "p256"])
            #expect(report.copiedEntries == 3)
            let after = try Self.content(path)
            #expect(after.map(\.nameString) == before.map(\.nameString))
            #expect(after.map(\.data) == before.map(\.data), "the manifest and items must be copied byte for byte")
            #expect(try KeySlotTests.open(path, identities: [world.a], password: nil).1 == 0)
            #expect(try ArchiveVerifier.verify(try KeySlotTests.open(path, identities: [], password: testPassword).0, keyStore: nil).items == 2)

            // Now only the recipient: the password no longer opens it.
            let (again, _) = try KeySlotTests.open(path, identities: [world.a], password: nil)
            _ = try ArchiveRekeyer.rekey(again, .init(add: ArchiveAccess(), removePasswords: true, removeRecipients: false))
            #expect(try Self.content(path).map(\.data) == before.map(\.data))
            expectArchiveError("noKeyOpens", kind: .authentication) { _ = try KeySlotTests.open(path, identities: [], password: testPassword) }
            #expect(try ArchiveVerifier.verify(try KeySlotTests.open(path, identities: [world.a], password: nil).0, keyStore: nil).items == 2)
        }
    }

    @Test("a rekey that would leave no slot is refused and changes nothing; -o never replaces a file")
    func refusals() throws {
        try withTemporaryDirectory { dir in
            let world = try KeySlotTests.World(dir: dir)
            let path = try world.archive("a", passwords: [testPassword], recipients: [world.a.publicKey])
            let bytes = try readBytes(path)
            let (unlocked, _) = try KeySlotTests.open(path, identities: [world.a], password: nil)
            expectArchiveError("rekeyWouldLock", kind: .usage) {
                _ = try ArchiveRekeyer.rekey(unlocked, .init(add: ArchiveAccess(), removePasswords: true, removeRecipients: true))
            }
            #expect(try readBytes(path) == bytes)
            let taken = dir + "/taken.nu11vlt"
            try writeBytes([1, 2, 3], to: taken)
            expectArchiveError("outputExists", kind: .outputExists) {
                _ = try ArchiveRekeyer.rekey(unlocked, .init(add: ArchiveAccess(recipients: [world.b.publicKey]), removePasswords: false,
                                                             removeRecipients: false), output: taken)
            }
            #expect(try readBytes(taken) == [1, 2, 3])
            #expect(listing(of: dir).allSatisfy { !$0.hasPrefix(".n11tmp") })
        }
    }

    @Test("the golden version 1 archive, rekeyed for a recipient, becomes version 2 with the same entries, keeps its password (same kdf) and restores with the identity")
    func fromVersion1() throws {
        try withTemporaryDirectory { dir in
            let copy = dir + "/v1.nu11vlt"
            try writeBytes(try readBytes(GoldenArchiveTests.golden + "/portable-v1.nu11vlt"), to: copy)
            let before = try Self.content(copy)
            let password = try GoldenArchiveTests().password()
            let v1 = try ArchiveReader(path: copy).unlock(password: { password }, keyStore: { throw NoKeyStore() })
            let identity = try P256PrivateKey.generate()
            _ = try ArchiveRekeyer.rekey(v1, .init(add: ArchiveAccess(recipients: [identity.publicKey]), removePasswords: false,
                                                   removeRecipients: false))
            let reader = try ArchiveReader(path: copy)
            #expect(reader.header.version == 2 && reader.header.slots.map(\.typeName) == ["password", "p256"])
            // The version 1 password is a password slot under the same kdf (salt and cost).
            guard case .password(let kdf, _)? = reader.header.slots.first else { Issue.record("no password slot"); return }
            #expect(kdf == v1.header.kdf)
            #expect(try reader.authenticate(password: { password }, keyStore: { throw NoKeyStore() }) == .password)
            #expect(try Self.content(copy).map(\.data) == before.map(\.data))
            // Removing passwords in the same change leaves only the recipient.
            let again = dir + "/v1-again.nu11vlt"
            try writeBytes(try readBytes(GoldenArchiveTests.golden + "/portable-v1.nu11vlt"), to: again)
            let v1Again = try ArchiveReader(path: again).unlock(password: { password }, keyStore: { throw NoKeyStore() })
            _ = try ArchiveRekeyer.rekey(v1Again, .init(add: ArchiveAccess(recipients: [identity.publicKey]), removePasswords: true,
                                                        removeRecipients: false))
            #expect(try ArchiveReader(path: again).header.slots.map(\.typeName) == ["p256"])
            let archive = try reader.unlock(password: { nil }, keyStore: { throw NoKeyStore() }, identities: { [identity] })
            let (_, vault) = try makeVault(in: dir, name: "restored")
            _ = try ArchiveRestorer.restore(archive, into: vault, .init(overwrite: false, dryRun: false))
            #expect(try GoldenArchiveTests().restoredItems(vault) == (try GoldenArchiveTests().originals()))
        }
    }
}
