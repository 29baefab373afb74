import Foundation
import Glibc
import Testing
import N11TestSupport
@testable import N11Vault
import N11Crypto
import N11Format
import N11System

/// `Vault.rotateKeys` and the key store's compartment key history: what a rotation changes,
/// what it keeps, a crash at every step of it, and what stops it.
@Suite("Key rotation: items sealed anew, old keys retired, crash at every step")
struct KeyRotationTests {
    /// A vault with items in every compartment (a fade item already expired among them).
    func filledVault(_ dir: String, store: KeyStore) throws -> [String: [UInt8]] {
        let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
        var contents: [String: [UInt8]] = [:]
        for (size, compartment) in [(0, Compartment.vault), (1, .vault), (70_000, .vault), (300, .backup)] {
            let bytes = randomBytes(size)
            contents[try vault.add(photo(bytes, compartment: compartment)).id] = bytes
        }
        let expired = try vault.add(photo([9, 9], compartment: .fade, expires: Date(timeIntervalSinceNow: -60)),
                                    now: Date(timeIntervalSinceNow: -120))
        contents[expired.id] = [9, 9]
        contents[try vault.add(note("hello", compartment: .fade, expires: Date(timeIntervalSinceNow: 3600))).id] = Array("hello".utf8)
        return contents
    }

    /// Runs `body` with the vault opened for writing (recovering what a kill left), and
    /// releases its lock afterwards, as a process that ends would.
    func withVault<T>(_ dir: String, _ store: KeyStore, _ body: (Vault) throws -> T) throws -> T {
        try body(try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true))
    }

    /// Every item (expired ones too) reads back as `contents`, from a fresh key store and
    /// vault (so nothing cached), with no damaged record; returns the items.
    @discardableResult
    func expectIntact(_ dir: String, _ contents: [String: [UInt8]], sourceLocation: SourceLocation = #_sourceLocation) throws -> [ItemMetadata] {
        let store = try storeOnDisk(dir)
        let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
        #expect(try vault.damagedItemIDs().isEmpty, sourceLocation: sourceLocation)
        let items = try vault.items(includeExpired: true)
        #expect(Set(items.map(\.id)) == Set(contents.keys), sourceLocation: sourceLocation)
        for item in items { #expect(try plaintext(of: item, in: vault) == contents[item.id], "\(item.id)", sourceLocation: sourceLocation) }
        #expect(listing(of: dir + "/vault").allSatisfy { !$0.hasPrefix(".n11staging-") }, "staging left behind", sourceLocation: sourceLocation)
        return items
    }

    /// The key store as its file holds it now (a fresh load, nothing cached).
    func storeOnDisk(_ dir: String) throws -> KeyStore {
        try KeyStore.load(from: N11Home(root: dir + "/home")) { nil }
    }

    /// The current key IDs of every compartment, from the file.
    func currentIDs(_ dir: String) throws -> [Compartment: [UInt8]] {
        let store = try storeOnDisk(dir)
        return Dictionary(uniqueKeysWithValues: try Compartment.allCases.map { ($0, try store.currentKeyID(for: $0)) })
    }

    @Test("a note staged after the key store was read again mid-change (another vault of the home rotated) has its record and its content under the same key, and both notes read back")
    func recordAndContentShareAKeyAcrossARefresh() throws {
        try withTemporaryDirectory { dir in
            _ = try makeHome(in: dir)
            // Loaded without the home's lock, as a vault add's store is: it can read the file again.
            let store = try storeOnDisk(dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let staging = try VaultStaging(vault: vault)
            func stage(_ text: String) throws -> ItemMetadata {
                try staging.stageNew(id: ItemID.random(), kind: .note, compartment: .vault, name: text, created: Date(), expires: nil,
                                     sealing: MemorySource(Array(text.utf8)), sizeHint: Int64(text.utf8.count))
            }
            let before = try stage("before the refresh")
            let oldKey = store.key(for: .vault).testBytes
            // Another vault of the same home rotates the vault compartment's key.
            _ = try Vault.open(at: dir + "/other", keyStore: try storeOnDisk(dir), forWriting: true).rotateKeys(of: [.vault])
            #expect(store.refreshCompartmentKeys())
            #expect(store.key(for: .vault).testBytes != oldKey, "the refresh took in the new key")
            let after = try stage("after the refresh")
            try staging.commit()
            let reopened = try Vault.open(at: dir + "/vault", keyStore: try storeOnDisk(dir), forWriting: false)
            #expect(try reopened.damagedItemIDs().isEmpty)
            #expect(try plaintext(of: try reopened.item(matching: before.id), in: reopened) == Array("before the refresh".utf8))
            #expect(try plaintext(of: try reopened.item(matching: after.id), in: reopened) == Array("after the refresh".utf8))
        }
    }

    @Test("every item is sealed anew under the new keys and reads back the same; the old keys are kept, retired, and open nothing in the vault")
    func rotation() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let contents = try filledVault(dir, store: store)
            let before = try currentIDs(dir)
            let oldKeys = Dictionary(uniqueKeysWithValues: Compartment.allCases.map { ($0, store.key(for: $0).testBytes) })
            let oldMarker = try readBytes(dir + "/vault/.n11vault")
            let (oldTags, report) = try withVault(dir, store) { vault in
                (Dictionary(uniqueKeysWithValues: try vault.items(includeExpired: true).map { ($0.id, $0.contentTag) }),
                 try vault.rotateKeys(of: Set(Compartment.allCases)))
            }
            #expect(report.items == [.vault: 3, .fade: 2, .backup: 1])
            #expect(report.bytes == contents.values.reduce(0) { $0 + Int64($1.count) })

            let after = try currentIDs(dir)
            for compartment in Compartment.allCases {
                #expect(after[compartment] != before[compartment])
                #expect(report.newKeyIDs[compartment] == after[compartment])
            }
            for item in try expectIntact(dir, contents) {
                #expect(item.keyID == after[item.compartment], "item \(item.id) opened under its compartment's new key")
                #expect(item.contentTag != oldTags[item.id], "item \(item.id) was sealed anew")
            }
            #expect(try readBytes(dir + "/vault/.n11vault") != oldMarker, "the marker is sealed under the new vault key")

            // The old keys are retired in the file: they open what they sealed, never write.
            let reloaded = try storeOnDisk(dir)
            for compartment in Compartment.allCases {
                let history = try #require(try reloaded.keyHistory().first { $0.compartment == compartment })
                #expect(history.retired == [before[compartment]!] && history.pending == nil && history.forgotten.isEmpty)
                #expect(try reloaded.key(for: compartment, id: before[compartment]!).testBytes == oldKeys[compartment])
                #expect(reloaded.key(for: compartment).testBytes != oldKeys[compartment])
                #expect(try reloaded.key(for: compartment, id: nil).testBytes == oldKeys[compartment], "nil names the first key")
            }
            // Nothing in the vault opens under an old key any more.
            let rows = try TestCatalogue.records(in: dir + "/vault")
            #expect(rows.count == contents.count)
            for (id, record) in rows {
                for key in oldKeys.values {
                    #expect(ItemMetadata.open(record, id: id, opener: try AEADOpener(ItemMetadata.algorithm, key: try SecureBytes(copying: key))) == nil)
                }
            }
            // A second rotation retires the first one's keys too, oldest first.
            _ = try withVault(dir, store) { try $0.rotateKeys(of: [.backup]) }
            let twice = try storeOnDisk(dir)
            let backup = try #require(try twice.keyHistory().first { $0.compartment == .backup })
            #expect(backup.retired == [before[.backup]!, after[.backup]!])
            #expect(try twice.currentKeyID(for: .vault) == after[.vault], "an unchosen compartment keeps its key")
            try expectIntact(dir, contents)
        }
    }

    @Test("a process whose key store was loaded before another rotated one compartment still lists every item")
    func staleKeyStoreAfterRotation() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let contents = try filledVault(dir, store: store)
            let stale = try storeOnDisk(dir)   // loaded now, before the rotation
            _ = try withVault(dir, try storeOnDisk(dir)) { vault in try vault.rotateKeys(of: [.backup]) }
            // Only the backup item is under a key `stale` has not seen: it must re-read the key
            // store, and still list the items that opened on the first pass.
            let reader = try Vault.open(at: dir + "/vault", keyStore: stale, forWriting: false)
            #expect(Set(try reader.items(includeExpired: true).map(\.id)) == Set(contents.keys))
            #expect(try reader.damagedItemIDs().isEmpty)
        }
    }

    @Test("killed before the commit: the old keys stay current, the items as they were; the next rotation drops the orphan pending keys")
    func killedBeforeJournal() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let contents = try filledVault(dir, store: store)
            let before = try currentIDs(dir)
            let files = snapshotFiles(dir + "/vault")
            try withVault(dir, store) { vault in
                let (staging, _) = try vault.stageKeyRotation(of: Set(Compartment.allCases), progress: nil)
                staging.abandon()
            }
            #expect(try currentIDs(dir) == before)
            let pending = try storeOnDisk(dir).keyHistory().compactMap(\.pending)
            #expect(pending.count == 3, "the pending keys were saved before anything was sealed under them")
            try expectIntact(dir, contents)
            #expect(snapshotFiles(dir + "/vault") == files, "the vault is byte for byte as before")
            _ = try withVault(dir, store) { try $0.rotateKeys(of: [.fade]) }
            let history = try storeOnDisk(dir).keyHistory()
            #expect(history.allSatisfy { $0.pending == nil })
            #expect(history.first { $0.compartment == .fade }?.retired == [before[.fade]!])
            try expectIntact(dir, contents)
        }
    }

    @Test("killed after the commit, at every file step: readers read every item, and the next writer finishes it, keys and items together",
          arguments: [0, 1, 2, 5, 8])
    func killedAfterJournal(applied: Int) throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let contents = try filledVault(dir, store: store)
            let before = try currentIDs(dir)
            let newIDs = try withVault(dir, store) { vault in
                let (staging, report) = try vault.stageKeyRotation(of: Set(Compartment.allCases), progress: nil)
                try staging.commitAndAbandon()
                let steps = try TestCatalogue.pending(in: dir + "/vault").map { try #require(VaultStaging.Operation(line: Substring($0))) }
                #expect(steps.count == contents.count + 2, "the promotion, each item, the marker")
                try VaultStaging.apply(Array(steps.prefix(applied)), in: dir + "/vault", keyStore: store)
                return report.newKeyIDs
            }
            // A reader before any writer: the new records, each item read where it is now.
            let reader = try Vault.open(at: dir + "/vault", keyStore: try storeOnDisk(dir), forWriting: false)
            #expect(try reader.damagedItemIDs().isEmpty)
            for item in try reader.items(includeExpired: true) { try reader.verify(item) }
            try expectIntact(dir, contents)
            #expect(try currentIDs(dir) == newIDs)
            for compartment in Compartment.allCases {
                #expect(try storeOnDisk(dir).keyHistory()
                    .first { $0.compartment == compartment }?.retired == [before[compartment]!])
            }
        }
    }

    @Test("a damaged record or a damaged item file stops the rotation before anything changes")
    func damageStopsIt() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            _ = try filledVault(dir, store: store)
            let before = try currentIDs(dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let victim = try #require(try vault.items().first { $0.size == 70_000 })
            // A flipped byte in the content: found while it is sealed anew.
            let content = vault.contentPath(of: victim)
            var bytes = try readBytes(content)
            bytes[100] ^= 1
            try writeBytes(bytes, to: content)
            let files = snapshotFiles(dir + "/vault")
            let error = expectVaultError("itemDamaged") { _ = try vault.rotateKeys(of: Set(Compartment.allCases)) }
            #expect(error?.description.contains(victim.id) == true)
            #expect(snapshotFiles(dir + "/vault") == files)
            #expect(try currentIDs(dir) == before)
            bytes[100] ^= 1
            try writeBytes(bytes, to: content)

            // A record that opens under no key: named, and nothing is written.
            let other = try #require(try vault.items().first { $0.size == 1 })
            try TestCatalogue.setRecord(randomBytes(120), id: other.id, in: vault.path)
            vault.forgetCachedItems()
            let keyStoreBytes = try readBytes(dir + "/home/keystore.n11keys")
            let blocked = expectVaultError("rotationBlockedByDamage") { _ = try vault.rotateKeys(of: [.vault]) }
            #expect(blocked?.description.contains(other.id) == true)
            #expect(blocked?.kind == .damaged)
            #expect(try currentIDs(dir) == before)
            #expect(try readBytes(dir + "/home/keystore.n11keys") == keyStoreBytes, "refused before the key store was touched")
        }
    }

    @Test("forgotten keys: only their IDs stay; what needs one is told so, and a key never held is told apart")
    func forgetting() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let contents = try filledVault(dir, store: store)
            let first = try currentIDs(dir)
            _ = try withVault(dir, store) { try $0.rotateKeys(of: Set(Compartment.allCases)) }
            let second = try currentIDs(dir)
            let report = try withVault(dir, store) { try $0.rotateKeys(of: [.vault, .fade], forgetRetired: true) }
            #expect(report.forgotten == 4)
            let reloaded = try storeOnDisk(dir)
            let history = try reloaded.keyHistory()
            #expect(history.first { $0.compartment == .vault }?.forgotten == [first[.vault]!, second[.vault]!])
            #expect(history.first { $0.compartment == .vault }?.retired == [])
            #expect(history.first { $0.compartment == .backup }?.retired == [first[.backup]!], "not chosen: kept")
            let forgotten = expectVaultError("compartmentKeyForgotten") { _ = try reloaded.key(for: .vault, id: second[.vault]!) }
            #expect(forgotten?.kind == .authentication)
            expectVaultError("compartmentKeyForgotten") { _ = try reloaded.key(for: .fade, id: nil) }
            expectVaultError("compartmentKeyUnknown") { _ = try reloaded.key(for: .vault, id: randomBytes(16)) }
            #expect(try reloaded.key(for: .backup, id: nil).testBytes == reloaded.key(for: .backup, id: first[.backup]!).testBytes)
            try expectIntact(dir, contents)
        }
    }

    @Test("a process that loaded the key store before a rotation neither undoes it when it saves nor reads items as damaged")
    func staleProcess() throws {
        try withTemporaryDirectory { dir in
            let (home, store) = try makeHome(in: dir)
            let contents = try filledVault(dir, store: store)
            let stale = try KeyStore.load(from: home) { nil }
            _ = try withVault(dir, store) { try $0.rotateKeys(of: Set(Compartment.allCases)) }
            let rotated = try currentIDs(dir)
            // Reading: the records under the new keys are found after one re-read of the file.
            let reader = try Vault.open(at: dir + "/vault", keyStore: stale, forWriting: false)
            #expect(try reader.damagedItemIDs().isEmpty)
            #expect(Set(try reader.items(includeExpired: true).map(\.id)) == Set(contents.keys))
            // Writing: adding an archive key saves what the file holds now, new keys included.
            let writer = try KeyStore.load(from: home) { nil }
            _ = try withVault(dir, store) { try $0.rotateKeys(of: [.vault]) }
            try writer.addArchiveKey(id: randomBytes(16), key: try SecureBytes(randomCount: 32))
            let now = try currentIDs(dir)
            #expect(now[.vault] != rotated[.vault], "the later rotation's key survived a save by a process that loaded before it")
            #expect(try writer.currentKeyID(for: .vault) == now[.vault])
            try expectIntact(dir, contents)
        }
    }

    @Test("a key store backup carries the retired keys: the store made from it opens what they sealed")
    func backupKeepsHistory() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            _ = try filledVault(dir, store: store)
            let first = try currentIDs(dir)
            _ = try withVault(dir, store) { try $0.rotateKeys(of: [.vault]) }
            let passphrase = try SecureBytes(copying: Array("a long backup passphrase".utf8))
            try store.writeBackup(to: dir + "/keys.n11backup", passphrase: passphrase)
            let restored = try KeyStore.restoreBackup(from: dir + "/keys.n11backup", passphrase: passphrase,
                                                      into: N11Home(root: dir + "/other"), pin: nil)
            #expect(try restored.keyHistory().map(\.retired) == (try store.keyHistory().map(\.retired)))
            #expect(try restored.key(for: .vault, id: first[.vault]!).testBytes == (try store.key(for: .vault, id: first[.vault]!).testBytes))
            #expect(try restored.currentKeyID(for: .vault) == (try store.currentKeyID(for: .vault)))
        }
    }

    @Test("the key store file: version 1 until a rotation, version 2 after; damaged history records are refused")
    func fileVersions() throws {
        try withTemporaryDirectory { dir in
            let (home, store) = try makeHome(in: dir)
            #expect(try readBytes(home.keyStorePath)[8] == 1)
            _ = try filledVault(dir, store: store)
            _ = try withVault(dir, store) { try $0.rotateKeys(of: [.backup]) }
            var bytes = try readBytes(home.keyStorePath)
            #expect(bytes[8] == 2)
            // A retired record whose ID is not its key's: damage. Records start at 10 + 20;
            // the fourth is the retired backup key; its id is at +1, checksum recomputed.
            let record = 10 + 20 + 3 * 49
            #expect(bytes[record] == 8, "the retired backup key's record")
            bytes[record + 1] ^= 1
            let body = Array(bytes[0..<(bytes.count - 32)])
            bytes = body + (try SHA256Digest.hash(body))
            try writeBytes(bytes, to: home.keyStorePath)
            expectVaultError("keyStoreDamaged") { _ = try KeyStore.load(from: home) { nil } }
        }
    }
}

/// Every file below `root` with its bytes, for "nothing changed" checks.
private func snapshotFiles(_ root: String) -> [String: [UInt8]] {
    Dictionary(uniqueKeysWithValues: allFiles(under: root).filter { !$0.hasSuffix("/.lock") }.map { ($0, (try? readBytes($0)) ?? []) })
}
