import Foundation
import Testing
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// What prune may take as "this home's archive" (DESIGN.md §3.8, issue 25 findings 2, 6, 7):
/// which slot opened it, the header read from a prefix alone, and bounded key derivation.
/// (That a stranger's recipient-only archive is not counted: `ArchivePrunerTests`.)
@Suite("Archive origin: which slot opened it, headers from a prefix, bounded Argon2id work")
struct ArchiveOriginTests {
    @Test("authenticate says which slot opened the archive; only a password or device slot proves origin")
    func openedBy() throws {
        try withTemporaryDirectory { dir in
            let world = try KeySlotTests.World(dir: dir)
            let mixed = try world.archive("mixed", passwords: [testPassword], recipients: [world.a.publicKey])
            let reader = try ArchiveReader(path: mixed)
            let byIdentity = try reader.authenticate(password: { nil }, keyStore: { throw NoKeyStore() }, identities: { [world.a] })
            #expect(byIdentity == .recipient && !byIdentity.provesOrigin)
            let byPassword = try reader.authenticate(password: { try secret(testPassword) }, keyStore: { throw NoKeyStore() })
            #expect(byPassword == .password && byPassword.provesOrigin)

            let (home, vault) = try makeVault(in: dir, name: "secure-home")
            _ = home
            let secure = dir + "/secure.nu11vlt"
            _ = try createArchive(from: vault, mode: .secure, to: secure)
            #expect(try ArchiveReader(path: secure).authenticate(password: { nil }, keyStore: { vault.keyStore }) == .device)
        }
    }

    @Test("the key entries from an archive's first 64 KiB authenticate its header like the whole file; other bytes give none")
    func prefixHeader() throws {
        try withTemporaryDirectory { dir in
            let world = try KeySlotTests.World(dir: dir)
            let path = try world.archive("big", passwords: [testPassword], recipients: [world.a.publicKey])
            let bytes = try readBytes(path)
            #expect(bytes.count > 64 << 10, "the prefix is not the whole archive")
            let prefix = Array(bytes.prefix(64 << 10))
            let entries = try #require(ArchiveKeyEntries(prefix: prefix, name: "dav:backups/big.nu11vlt"))
            #expect(entries.header == (try ArchiveReader(path: path).header))
            #expect(try entries.authenticate(password: { try secret(testPassword) }, keyStore: { throw NoKeyStore() }) == .password)
            expectArchiveError("wrongPassword", kind: .authentication) {
                _ = try entries.authenticate(password: { try secret("wrong") }, keyStore: { throw NoKeyStore() })
            }
            // A changed header does not authenticate from the prefix either.
            let changed = try KeySlotTests.withSlots(path, "changed") { Array($0.reversed()) }
            let changedEntries = try #require(ArchiveKeyEntries(prefix: Array(try readBytes(changed).prefix(64 << 10)), name: changed))
            expectArchiveError("damaged", kind: .damaged) {
                _ = try changedEntries.authenticate(password: { try secret(testPassword) }, keyStore: { throw NoKeyStore() })
            }
            #expect(ArchiveKeyEntries(prefix: randomBytes(64 << 10), name: "garbage") == nil)
            #expect(ArchiveKeyEntries(prefix: Array(bytes.prefix(200)), name: "cut short") == nil)
        }
    }

    @Test("four password slots of 32 passes are refused before the password is asked for; two moderate slots are within the ceiling")
    func kdfWorkCeiling() throws {
        try withTemporaryDirectory { dir in
            let world = try KeySlotTests.World(dir: dir)
            let path = try world.archive("costly", passwords: [testPassword], recipients: [])
            func slots(_ count: Int, ops: UInt64, memoryMiB: UInt64) -> ([ArchiveHeader.KeySlot]) -> [ArchiveHeader.KeySlot] {
                { slots in
                    guard case .password(_, let wrap) = slots[0] else { return slots }
                    return (0..<count).map { _ in
                        .password(ArchiveHeader.KDF(opsLimit: ops, memoryKiB: memoryMiB << 10, salt: SecureRandom.bytes(16)), wrap: wrap)
                    }
                }
            }
            let planted = try KeySlotTests.withSlots(path, "planted", slots(4, ops: 32, memoryMiB: 512))
            var asked = 0
            let error = expectArchiveError("kdfWorkAboveCeiling", kind: .usage) {
                _ = try ArchiveReader(path: planted).authenticate(password: { asked += 1; return try secret(testPassword) },
                                                                  keyStore: { throw NoKeyStore() })
            }
            #expect(asked == 0, "nothing derived, no password asked")
            #expect(error?.description.contains("65536") == true, "\(String(describing: error))")
            // Each slot alone is within the memory ceiling: only the sum is refused.
            let single = try KeySlotTests.withSlots(path, "single", slots(1, ops: 32, memoryMiB: 64))
            expectArchiveError("passwordNeeded", kind: .usage) {
                _ = try ArchiveReader(path: single).authenticate(password: { nil }, keyStore: { throw NoKeyStore() })
            }
            let moderate = try KeySlotTests.withSlots(path, "moderate", slots(2, ops: 3, memoryMiB: 256))
            expectArchiveError("passwordNeeded", kind: .usage) {
                _ = try ArchiveReader(path: moderate).authenticate(password: { nil }, keyStore: { throw NoKeyStore() })
            }
        }
    }

    @Test("a later format version is reported as unsupported before its new entries or header fields are looked at")
    func laterVersion() throws {
        try withTemporaryDirectory { dir in
            var entries = try RawZip.entries(of: try readBytes(GoldenArchiveTests.golden + "/portable-v2.nu11vlt"))
            let header = String(decoding: entries[0].data, as: UTF8.self)
                .replacingOccurrences(of: "\"version\":2}", with: "\"version\":4,\"index\":\"x\"}")
            entries[0] = .stored(EntryName.header, Array(header.utf8))
            entries.append(.stored("index.bin", [1, 2, 3]))
            let path = dir + "/v4.nu11vlt"
            try writeBytes(RawZip.build(entries), to: path)
            let error = expectArchiveError("unsupported", kind: .damaged) { _ = try ArchiveReader(path: path) }
            #expect(error?.description.contains("version 4 is not supported") == true, "\(String(describing: error))")
        }
    }

    @Test("adopt records a verified archive once, never one dated in the future or changed since its verification began")
    func adopt() throws {
        try withTemporaryDirectory { dir in
            let (home, vault) = try makeVault(in: dir, name: "home")
            let path = dir + "/a.nu11vlt", future = dir + "/future.nu11vlt"
            _ = try createArchive(from: vault, mode: .portable, to: path)
            _ = try createArchive(from: vault, mode: .portable, to: future, now: Date().addingTimeInterval(3600))
            let other = N11Home(root: dir + "/new-home")
            let reader = try ArchiveReader(path: path)
            let before = try #require(try FileStatus.of(path, followLinks: true))
            let record = try #require(try WrittenArchives.adopt(reader, location: path, verifiedAs: before, in: other))
            #expect(record.location == path && record.size == before.size)
            #expect(try WrittenArchives.adopt(reader, location: dir + "/elsewhere.nu11vlt", verifiedAs: before, in: other) == nil,
                    "a second adoption replaced the record")
            #expect(try WrittenArchives.lookup(reader.header.archiveIDHex, in: other)?.location == path)

            let futureReader = try ArchiveReader(path: future)
            let futureStatus = try #require(try FileStatus.of(future, followLinks: true))
            expectArchiveError("damaged", kind: .damaged) {
                _ = try WrittenArchives.adopt(futureReader, location: future, verifiedAs: futureStatus, in: other)
            }
            // Changed after its verification began (here: its size): not recorded.
            let third = dir + "/b.nu11vlt"
            _ = try createArchive(from: vault, mode: .portable, to: third)
            let thirdReader = try ArchiveReader(path: third)
            let stale = try #require(try FileStatus.of(path, followLinks: true))   // another file's status
            expectArchiveError("damaged", kind: .damaged) {
                _ = try WrittenArchives.adopt(thirdReader, location: third, verifiedAs: stale, in: other)
            }
            _ = home
        }
    }

    @Test("a KDF cache derives once per salt and cost")
    func kdfCache() throws {
        let cache = KDFCache()
        var derived = 0
        let kdf = ArchiveHeader.KDF(opsLimit: 1, memoryKiB: 8 << 10, salt: SecureRandom.bytes(16))
        let other = ArchiveHeader.KDF(opsLimit: 1, memoryKiB: 8 << 10, salt: SecureRandom.bytes(16))
        let costlier = ArchiveHeader.KDF(opsLimit: 2, memoryKiB: 8 << 10, salt: kdf.saltBytes)
        func derive() throws -> SecureBytes { derived += 1; return try SecureBytes(copying: SecureRandom.bytes(32)) }
        let first = try cache.kek(for: kdf, derive: derive)
        #expect(try cache.kek(for: kdf, derive: derive) === first && derived == 1)
        _ = try cache.kek(for: other, derive: derive)
        _ = try cache.kek(for: costlier, derive: derive)
        #expect(derived == 3)
    }
}
