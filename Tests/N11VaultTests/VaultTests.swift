import Foundation
import Glibc
import Testing
import N11Crypto
import N11Format
import N11System
import N11TestSupport
@testable import N11Vault

private let overhead = 12 + 16   // nonce ‖ … ‖ tag of every content file

@Suite("Vault: layout, items, tampering, fade, locking, leftovers")
struct VaultTests {

    // MARK: layout and round trip

    @Test("open(forWriting:) creates the layout; photos and notes round-trip; nothing readable on disk")
    func layoutAndRoundTrip() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vaultPath = dir + "/vaults/main"
            let vault = try Vault.open(at: vaultPath, keyStore: store, forWriting: true)
            #expect(vault.path == vaultPath)
            for sub in ["Photos", "Notes"] {
                var st = stat()
                #expect(lstat(vaultPath + "/" + sub, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR, "\(sub) missing")
                #expect(mode(of: vaultPath + "/" + sub) == 0o700)
            }
            #expect(exists(vaultPath + "/.n11vault"))
            #expect(!exists(vaultPath + "/Meta"), "a new vault keeps its records in the catalogue")
            #expect(mode(of: TestCatalogue.path(vaultPath)) == 0o600, "the catalogue is private whatever the umask")
            #expect(mode(of: vaultPath) == 0o700)
            #expect(try vault.items().isEmpty)

            // A 32-byte marker inside the big photo and the note; the names are unique too.
            let marker = randomBytes(32)
            var big = randomBytes((1 << 20) + 3)
            big.replaceSubrange(4096..<(4096 + 32), with: marker)
            let noteText = "door code " + marker.map { String(format: "%02x", $0) }.joined()
            let names = (0..<4).map { _ in "IMG_\(randomBytes(8).map { String(format: "%02x", $0) }.joined()).jpg" }
            let contents: [[UInt8]] = [[], [0x42], big]

            let before = Date()
            var added: [ItemMetadata] = []
            for (i, bytes) in contents.enumerated() {
                added.append(try vault.add(photo(bytes, name: names[i])))
            }
            added.append(try vault.add(note(noteText, name: names[3])))
            let after = Date()

            // The listing, from a fresh vault object (nothing cached).
            let reopened = try Vault.open(at: vaultPath, keyStore: store, forWriting: false)
            let listed = try reopened.items()
            #expect(listed.count == 4)
            #expect(Set(listed.map(\.id)) == Set(added.map(\.id)))
            for item in added {
                let found = try #require(listed.first { $0.id == item.id })
                // `created` is compared to the second: see metadataRoundTrip.
                #expect(found.kind == item.kind && found.name == item.name && found.size == item.size)
                #expect(found.contentTag == item.contentTag && found.sha256 == item.sha256)
                #expect(abs(found.created.timeIntervalSince(item.created)) < 1)
                #expect(UUID(uuidString: found.id) != nil)
                #expect(found.compartment == .vault)
                #expect(found.expires == nil)
                #expect(found.created >= before.addingTimeInterval(-1) && found.created <= after.addingTimeInterval(1))
            }
            for (i, bytes) in contents.enumerated() {
                let item = added[i]
                #expect(item.kind == .photo)
                #expect(item.name == names[i])
                #expect(item.size == Int64(bytes.count))
                #expect(try plaintext(of: item, in: reopened) == bytes, "photo of \(bytes.count) bytes differs")
                try reopened.verify(item)
                let content = reopened.contentPath(of: item)
                #expect(content == vaultPath + "/Photos/\(item.id).n11")
                #expect(fileSize(content) == Int64(overhead + bytes.count))
                #expect(mode(of: content) == 0o600)
                #expect(try TestCatalogue.record(id: item.id, in: vaultPath) != nil)
            }
            let noteItem = added[3]
            #expect(noteItem.kind == .note)
            #expect(noteItem.name == names[3])
            #expect(noteItem.size == Int64(noteText.utf8.count))
            #expect(reopened.contentPath(of: noteItem) == vaultPath + "/Notes/\(noteItem.id).n11note")
            #expect(fileSize(reopened.contentPath(of: noteItem)) == Int64(overhead + noteText.utf8.count))
            #expect(try plaintext(of: noteItem, in: reopened) == Array(noteText.utf8))

            // §3.1: neither plaintext nor names anywhere under the vault.
            let files = allFiles(under: vaultPath)
            #expect(files.count >= 9)   // marker, lock, 4 contents, 4 metadata
            for file in files {
                let bytes = try readBytes(file)
                #expect(!contains(bytes, marker), "\(file) contains the photo's plaintext")
                #expect(!contains(bytes, Array(noteText.utf8.prefix(40))), "\(file) contains the note's plaintext")
                for name in names {
                    #expect(!contains(bytes, Array(name.utf8)), "\(file) contains the item name \(name)")
                }
            }
        }
    }

    /// SOURCE BUG (reported): metadata dates are stored with JSONEncoder's .iso8601 strategy,
    /// which drops fractions of a second, but Vault.add returns (and caches) the exact Date.
    /// What add returns is not what every later reader sees, and a fade expiry moves.
    @Test("the metadata add returns is the metadata a later reader gets (created, expires)")
    func metadataRoundTrip() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let now = Date(timeIntervalSince1970: 1_800_000_000.75)
            let plain = try vault.add(photo([1, 2, 3]), now: now)
            let fading = try vault.add(photo([4], compartment: .fade, expires: now.addingTimeInterval(90)), now: now)
            let reread = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: false)
                .items(includeExpired: true, now: now)
            let plainBack = try #require(reread.first { $0.id == plain.id })
            let fadingBack = try #require(reread.first { $0.id == fading.id })
            #expect(plainBack == plain)
            #expect(fadingBack.expires == fading.expires)
            #expect(abs(plainBack.created.timeIntervalSince(plain.created)) < 1)
        }
    }

    @Test("the duplicate check finds an earlier item of the same add whether its digest waits in memory or went to the scratch database, and the vault's; its row put as it came or held back",
          arguments: [false, true])
    func duplicatesAcrossPendingAndDatabase(rowsHeldBack: Bool) throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            func note(_ text: String, _ name: String) -> Vault.NewItem {
                Vault.NewItem(bytes: Array(text.utf8), kind: .note, name: name, compartment: .vault, expires: nil)
            }
            let old = try vault.add(note("already here", "old"))
            // Held back, a row is looked up only once the duplicate check has them put.
            if rowsHeldBack { vault.rowsGoStraightInBelow = 0 }
            // More than the check holds in memory (32,768): the first notes' digests have gone
            // to its database when their copies come, the last ones' have not.
            let count = 33_000
            var items = (0..<count).map { note("note \($0)", "n\($0)") }
            items += [note("note 0", "copy of n0"), note("note 5", "copy of n5"), note("note 32767", "copy of n32767"),
                      note("note 32990", "copy of n32990"), note("already here", "copy of old"), note("note 5 and more", "new one")]
            var next = items.makeIterator()
            var skipped: [String: String] = [:]
            let added = try vault.add(from: { next.next() }, skippingDuplicates: true,
                                      skipped: { skipped[$0.name] = $0.existing.name })
            #expect(added == count + 1)
            #expect(skipped == ["copy of n0": "n0", "copy of n5": "n5", "copy of n32767": "n32767", "copy of n32990": "n32990",
                                "copy of old": old.name])
            #expect(try vault.items().count == count + 2)
        }
    }

    @Test("the duplicate check finds copies among more distinct sizes than it remembers (4,096), whether their size was seen long before or just now")
    func duplicatesAmongManySizes() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            func note(_ length: Int, _ fill: Character, _ name: String) -> Vault.NewItem {
                Vault.NewItem(bytes: Array(String(repeating: fill, count: length).utf8), kind: .note, name: name,
                              compartment: .vault, expires: nil)
            }
            // 6,000 notes, each of its own length: the remembered sizes are emptied once.
            let count = 6_000
            var items = (1...count).map { note($0, "a", "n\($0)") }
            items += [note(1, "a", "copy of n1"), note(3_000, "a", "copy of n3000"), note(count, "a", "copy of n\(count)"),
                      note(2, "b", "same size as n2, other content"), note(count + 1, "a", "a new size")]
            var next = items.makeIterator()
            var skipped: [String: String] = [:]
            let added = try vault.add(from: { next.next() }, skippingDuplicates: true,
                                      skipped: { skipped[$0.name] = $0.existing.name })
            #expect(skipped == ["copy of n1": "n1", "copy of n3000": "n3000", "copy of n\(count)": "n\(count)"])
            #expect(added == count + 2)
            // A second add finds them among the vault's own items.
            var again = [note(1, "a", "again n1"), note(4_500, "a", "again n4500"), note(7, "c", "not again")].makeIterator()
            skipped = [:]
            _ = try vault.add(from: { again.next() }, skippingDuplicates: true, skipped: { skipped[$0.name] = $0.existing.name })
            #expect(skipped == ["again n1": "n1", "again n4500": "n4500"])
        }
    }

    @Test("an add of many items, their catalogue rows put as they come or held back past what a run keeps in memory: every one is in the catalogue and reads back",
          arguments: [(ItemKind.note, true), (.photo, true), (.note, false)])
    func manyRowsSpooled(kind: ItemKind, heldBack: Bool) throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let count = 20_000
            do {
                let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
                // 20,000 rows fit the catalogue's cache: held back only when told to.
                if heldBack { vault.rowsGoStraightInBelow = 0 }
                var n = 0
                let added = try vault.add(from: {
                    defer { n += 1 }
                    guard n < count else { return nil }
                    let bytes = Array("note \(n)".utf8)
                    // A note's bytes are in memory (`stageNew`); a photo is opened as a file would be (`stage`).
                    return kind == .note
                        ? Vault.NewItem(bytes: bytes, kind: .note, name: "n\(n)", compartment: .vault, expires: nil)
                        : Vault.NewItem(opening: { MemorySource(bytes) }, kind: .photo, name: "n\(n)", compartment: .vault,
                                        expires: nil, sizeHint: Int64(bytes.count), rereadable: true)
                })
                #expect(added == count)
            }
            let reader = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: false)
            let items = try reader.items()
            #expect(Set(items.map(\.name)) == Set((0..<count).map { "n\($0)" }))
            for item in items.shuffled().prefix(20) {
                #expect(try plaintext(of: item, in: reader) == Array("note \(item.name.dropFirst())".utf8))
            }
            #expect(listing(of: dir + "/vault/" + kind.directory).count == count)
        }
    }

    @Test("an add told how many items come, more than a run of rows, gives them ascending IDs in their order, so past the catalogue's cache each row goes straight in; one not told, or smaller, gives random IDs, held back",
          arguments: [(true, 39), (false, 39), (true, 40)])
    func addThatKnowsItsCount(told: Bool, ascendingAbove: Int) throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            vault.rowsGoStraightInBelow = 0   // every change is past its cache
            vault.ascendingIDsAbove = ascendingAbove
            let ascends = told && ascendingAbove < 40
            let catalogue = try #require(vault.catalogue)
            let count = 40
            var n = 0
            var ids: [String] = [], inCatalogueWhenStaged: [Bool] = []
            try vault.add(from: {
                defer { n += 1 }
                return n < count ? Vault.NewItem(bytes: Array("note \(n)".utf8), kind: .note, name: "n\(n)", compartment: .vault,
                                                 expires: nil) : nil
            }, count: told ? count : nil, staged: { item in
                ids.append(item.id)
                inCatalogueWhenStaged.append(try catalogue.contains(id: item.id))
            })
            let ascending = zip(ids, ids.dropFirst()).allSatisfy { $0 < $1 }
            #expect(ascending == ascends)
            #expect(inCatalogueWhenStaged.allSatisfy { $0 } == ascends)
            let items = try vault.items()
            #expect(Set(items.map(\.id)) == Set(ids) && items.count == count)
            #expect(Dictionary(uniqueKeysWithValues: items.map { ($0.id, $0.name) }) == Dictionary(uniqueKeysWithValues: ids.enumerated().map { ($1, "n\($0)") }))
        }
    }

    @Test("past the catalogue's cache, new rows that come in ID order (a restore's) go straight in; from the first out of order on, rows are held back until the writes are waited for")
    func rowsInIDOrderAreNotHeldBack() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            vault.rowsGoStraightInBelow = 0   // every change is past its cache
            let staging = try VaultStaging(vault: vault)
            let ids = (0..<6).map { _ in UUID().uuidString }.sorted()
            // In ID order, then one below the last, then one above it again.
            let order = [ids[0], ids[2], ids[4], ids[1], ids[5], ids[3]]
            for id in order {
                try staging.stageNew(id: id, kind: .note, compartment: .vault, name: "n-\(id)", created: Date(),
                                     expires: nil, sealing: MemorySource(Array(id.utf8)), sizeHint: 36)
            }
            let catalogue = try #require(vault.catalogue)
            #expect(try order.map { try catalogue.contains(id: $0) } == [true, true, true, false, false, false])
            try staging.waitForWrites()
            #expect(try order.allSatisfy { try catalogue.contains(id: $0) })
            try staging.commit()
            #expect(try Set(vault.items().map(\.id)) == Set(ids))
        }
    }

    @Test("items of the backup compartment are listed under it and read back")
    func backupCompartment() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let bytes = randomBytes(1000)
            let item = try vault.add(photo(bytes, compartment: .backup))
            let reopened = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: false)
            let listed = try reopened.items()
            #expect(listed.map(\.compartment) == [.backup])
            #expect(try plaintext(of: item, in: reopened) == bytes)
        }
    }

    // MARK: tampering

    // Both sizes: a file up to 64 KiB is read whole when opened, a larger one through seeks.
    @Test("a flipped byte (nonce, ciphertext, tag) in a small or a large content file: read and verify throw itemDamaged",
          arguments: ["nonce", "ciphertext", "tag"], [1_000, 70_000])
    func flippedContentByte(position: String, size: Int) throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let bytes = randomBytes(size)
            let item = try vault.add(photo(bytes))
            let content = vault.contentPath(of: item)
            let offset = switch position {
                case "nonce": 3
                case "ciphertext": 12 + size * 5 / 7
                default: overhead + bytes.count - 2
            }
            try flipByte(in: content, at: offset)

            // The staging contract: the read must throw; what the sink saw is not trusted.
            let sink = CollectingSink()
            let error = expectVaultError("itemDamaged") { try vault.read(item, into: sink) }
            #expect(error?.kind == .damaged)
            #expect(error?.description.contains(item.id) == true)
            expectVaultError("itemDamaged") { try vault.verify(item) }
            // The listing still works: only the content is damaged.
            #expect(try vault.items().map(\.id) == [item.id])
        }
    }

    // A large file out of the page cache is read around it (`DirectFileReader`): the same
    // checks must hold on that path, and it must leave the cache as it found it.
    @Test("a large content file out of the page cache verifies and reads back without entering the cache; a flipped byte in it is itemDamaged",
          .enabled(if: (try? takesDirectIO("/tmp")) == true, "/tmp takes no direct I/O (tmpfs): no file there is read around the cache"))
    func largeOutOfTheCache() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let bytes = randomBytes(Int(DirectFileReader.worthFrom) + 1_000_003)
            let item = try vault.add(photo(bytes))
            let content = vault.contentPath(of: item)
            try #require(try dropFromPageCache(content), "this file system keeps pages after POSIX_FADV_DONTNEED; the test cannot tell")
            try vault.verify(item)
            // Read through the cache, all 1,269 pages would be there now; only the page of the
            // tag, checked when the file was opened, is.
            let cached = try residentPages(content)
            #expect(cached.resident <= 1, "\(cached.resident) of \(cached.pages) pages cached")
            try #require(try dropFromPageCache(content))
            #expect(try plaintext(of: item, in: vault) == bytes)

            try flipByte(in: content, at: 12 + bytes.count * 3 / 4)
            try #require(try dropFromPageCache(content))
            let error = expectVaultError("itemDamaged") { try vault.verify(item) }
            #expect(error?.description.contains(item.id) == true)
            try #require(try dropFromPageCache(content))
            expectVaultError("itemDamaged") { try vault.read(item, into: CollectingSink()) }
        }
    }

    @Test("a large input photo out of the page cache is added byte for byte, it and its content file left out of the cache; one in the cache as well",
          .enabled(if: (try? takesDirectIO("/tmp")) == true, "/tmp takes no direct I/O (tmpfs): no file there is read around the cache"))
    func largeInputOutOfTheCache() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let bytes = randomBytes(Int(max(DirectFileReader.worthFrom, VaultStaging.addedAroundPageCacheFrom)) + 777_777)
            let input = dir + "/IMG_0002.jpg"
            try writeBytes(bytes, to: input)
            try #require(try dropFromPageCache(input), "this file system keeps pages after POSIX_FADV_DONTNEED; the test cannot tell")
            let file = try InputFile.check(input, asNote: false)
            let cold = try vault.add(Vault.NewItem(file: file, kind: .photo, name: file.name, compartment: .vault, expires: nil))
            #expect(try plaintext(of: cold, in: vault) == bytes)
            let cached = try residentPages(input)
            #expect(cached.resident == 0, "\(cached.resident) of \(cached.pages) pages of the input cached")
            // And its content file was written around the cache but for its last, partial page.
            let content = try residentPages(vault.contentPath(of: cold))
            #expect(content.resident <= 1, "\(content.resident) of \(content.pages) pages of the content file cached")
            // Read once through the cache, the file is read from it by the next add.
            _ = try readBytes(input)
            try #require(try residentPages(input).resident == residentPages(input).pages)
            let warm = try vault.add(Vault.NewItem(file: file, kind: .photo, name: "again.jpg", compartment: .vault, expires: nil))
            #expect(try plaintext(of: warm, in: vault) == bytes)
        }
    }

    // Large items are written around the page cache, their last writes on the writer's
    // thread while the add goes on: the duplicate check must wait for a file of the same
    // add before it reads it, and a failure must wait before it removes what was handed over.
    @Test("large items of one add written around the page cache: a duplicate of one is found, and a failure after one adds nothing and leaves no file")
    func largeItemsOfOneAdd() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let size = Int(VaultStaging.addedAroundPageCacheFrom) + 333_333
            let first = randomBytes(size), second = randomBytes(size)
            func large(_ bytes: [UInt8], _ name: String) -> Vault.NewItem {
                Vault.NewItem(opening: { MemorySource(bytes) }, kind: .photo, name: name, compartment: .vault, expires: nil,
                              sizeHint: Int64(bytes.count), rereadable: true)
            }
            var skipped: [Vault.Duplicate] = []
            let added = try vault.add([large(first, "a.jpg"), large(second, "b.jpg"), large(first, "a-again.jpg")],
                                      skippingDuplicates: true, skipped: { skipped.append($0) })
            #expect(added.map(\.name) == ["a.jpg", "b.jpg"])
            #expect(skipped.map(\.name) == ["a-again.jpg"])
            #expect(try plaintext(of: added[0], in: vault) == first)
            #expect(try plaintext(of: added[1], in: vault) == second)

            let photos = listing(of: dir + "/vault/Photos")
            struct Unreadable: Error {}
            let failing = Vault.NewItem(opening: { throw Unreadable() }, kind: .photo, name: "c.jpg", compartment: .vault,
                                        expires: nil, sizeHint: Int64(size))
            #expect(throws: (any Error).self) {
                _ = try vault.add([large(randomBytes(size), "d.jpg"), large(randomBytes(size), "e.jpg"), failing])
            }
            #expect(try vault.items().map(\.name).sorted() == ["a.jpg", "b.jpg"])
            #expect(listing(of: dir + "/vault/Photos") == photos)
        }
    }

    @Test("a truncated or missing content file is itemDamaged", arguments: [0, 11, 12, 27, 28, 1000 + 27])
    func truncatedContent(length: Int) throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let item = try vault.add(photo(randomBytes(1000)))
            try truncateFile(vault.contentPath(of: item), to: length)
            expectVaultError("itemDamaged") { try vault.read(item, into: CollectingSink()) }
            expectVaultError("itemDamaged") { try vault.verify(item) }
            #expect(unlink(vault.contentPath(of: item)) == 0)
            let missing = expectVaultError("contentMissing") { try vault.verify(item) }
            #expect(missing?.kind == .damaged && missing?.description.contains("is missing") == true)
        }
    }

    @Test("appending bytes to a content file is itemDamaged")
    func extendedContent() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let item = try vault.add(photo(randomBytes(1000)))
            let path = vault.contentPath(of: item)
            try writeBytes(try readBytes(path) + [0], to: path)
            expectVaultError("itemDamaged") { try vault.verify(item) }
        }
    }

    @Test("swapping the content files of two items of the same compartment and size is detected")
    func swappedContents() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let a = try vault.add(photo(randomBytes(5000), name: "a.jpg"))
            let b = try vault.add(photo(randomBytes(5000), name: "b.jpg"))
            let pathA = vault.contentPath(of: a), pathB = vault.contentPath(of: b)
            let tmp = dir + "/swap"
            #expect(rename(pathA, tmp) == 0)
            #expect(rename(pathB, pathA) == 0)
            #expect(rename(tmp, pathB) == 0)
            let sink = CollectingSink()
            expectVaultError("itemDamaged") { try vault.read(a, into: sink) }
            expectVaultError("itemDamaged") { try vault.read(b, into: CollectingSink()) }
            expectVaultError("itemDamaged") { try vault.verify(a) }
            expectVaultError("itemDamaged") { try vault.verify(b) }
        }
    }

    @Test("a damaged record is reported by ID and the catalogue's path, the other items stay usable, and it can be removed")
    func damagedMetadata() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let (item, intact) = try { () throws -> (ItemMetadata, ItemMetadata) in
                let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
                return (try vault.add(photo(randomBytes(10))), try vault.add(photo(randomBytes(20))))
            }()
            let reopened = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: false)
            try TestCatalogue.flipRecordByte(id: item.id, at: 20, in: dir + "/vault")
            #expect(try reopened.items().map(\.id) == [intact.id])
            #expect(try reopened.damagedItemIDs() == [item.id])
            let errors = try reopened.damagedItemErrors()
            #expect(errors.count == 1 && errors[0].kind == .damaged)
            #expect(errors[0].description.contains(item.id) && errors[0].description.contains("Catalogue.sqlite"))

            let writer = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            try writer.removeDamaged(id: item.id)
            #expect(try TestCatalogue.record(id: item.id, in: dir + "/vault") == nil && !exists(writer.contentPath(of: item)))
            #expect(try writer.damagedItemIDs().isEmpty)
            #expect(try plaintext(of: intact, in: writer).count == 20)
        }
    }

    @Test("an item looked up by its ID alone: there, absent, or damaged, expired fade items included")
    func lookUpByID() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let kept = try vault.add(photo(randomBytes(10)))
            let damaged = try vault.add(photo(randomBytes(20)))
            let fading = try vault.add(note("gone", compartment: .fade, expires: Date(timeIntervalSinceNow: -60)),
                                       now: Date(timeIntervalSinceNow: -120))
            try TestCatalogue.flipRecordByte(id: damaged.id, at: 20, in: dir + "/vault")
            let reader = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: false)
            guard case .item(let found) = try reader.lookUp(id: kept.id), case .item(let expired) = try reader.lookUp(id: fading.id) else {
                Issue.record("a live or expired item was not found")
                return
            }
            #expect(found.id == kept.id && found.sha256 == kept.sha256 && found.name == kept.name)
            #expect(expired.id == fading.id && expired.isExpired(at: Date()))
            #expect(try reader.lookUp(id: damaged.id) == .damaged)
            #expect(try reader.lookUp(id: UUID().uuidString) == .absent)
        }
    }

    @Test("lookups of absent IDs compile no statement each: a restore into an empty vault asks twice an item")
    func lookUpAbsentCompilesNothing() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let catalogue = try #require(vault.catalogue)
            let (first, afterFirst, rest) = try vault.readingOneState { () throws -> (Vault.Lookup, Int, [Vault.Lookup]) in
                let first = try vault.lookUp(id: UUID().uuidString)
                let afterFirst = catalogue.statementsPrepared
                let rest = try (0..<100).map { _ in try vault.lookUp(id: UUID().uuidString) }
                return (first, afterFirst, rest)
            }
            #expect(first == .absent && rest.allSatisfy { $0 == .absent })
            #expect(catalogue.statementsPrepared == afterFirst, "each lookup compiled a statement of its own")
            let item = try vault.add(photo(randomBytes(10)))
            guard case .item(let found) = try vault.lookUp(id: item.id) else {
                Issue.record("an item added after absent lookups was not found")
                return
            }
            #expect(found.sha256 == item.sha256)
        }
    }

    // MARK: mismatch

    @Test("a vault opened with another key store is vaultMismatch")
    func otherKeyStore() throws {
        try withTemporaryDirectory { dir in
            let (_, storeA) = try makeHome(in: dir, name: "a")
            let (_, storeB) = try makeHome(in: dir, name: "b")
            do {
                let vault = try Vault.open(at: dir + "/vault", keyStore: storeA, forWriting: true)
                _ = try vault.add(photo(randomBytes(10)))
            }
            let markerBefore = try readBytes(dir + "/vault/.n11vault")
            let e1 = expectVaultError("vaultMismatch") { _ = try Vault.open(at: dir + "/vault", keyStore: storeB, forWriting: false) }
            #expect(e1?.kind == .authentication)
            expectVaultError("vaultMismatch") { _ = try Vault.open(at: dir + "/vault", keyStore: storeB, forWriting: true) }
            #expect(try readBytes(dir + "/vault/.n11vault") == markerBefore)
            #expect(try Vault.open(at: dir + "/vault", keyStore: storeA, forWriting: false).items().count == 1)
        }
    }

    @Test("a non-empty directory without a marker, or a file, is notAVault; nothing is created in it")
    func notAVault() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let photos = dir + "/my-photos"
            #expect(mkdir(photos, 0o755) == 0)
            try writeBytes([1, 2, 3], to: photos + "/holiday.jpg")
            expectVaultError("notAVault") { _ = try Vault.open(at: photos, keyStore: store, forWriting: true) }
            expectVaultError("notAVault") { _ = try Vault.open(at: photos, keyStore: store, forWriting: false) }
            #expect(listing(of: photos) == ["holiday.jpg"])

            try writeBytes([1], to: dir + "/plain-file")
            expectVaultError("notAVault") { _ = try Vault.open(at: dir + "/plain-file", keyStore: store, forWriting: true) }
            // Read-only opening never creates a vault, and says it is missing (66), not that
            // something is there.
            let absent = expectVaultError("vaultMissing") { _ = try Vault.open(at: dir + "/absent", keyStore: store, forWriting: false) }
            #expect(absent?.kind == .missingInput)
            #expect(!exists(dir + "/absent"))
            // An empty directory becomes a vault.
            #expect(mkdir(dir + "/empty", 0o700) == 0)
            _ = try Vault.open(at: dir + "/empty", keyStore: store, forWriting: true)
            #expect(exists(dir + "/empty/.n11vault"))
        }
    }

    // MARK: fade

    @Test("a fade item is live until it expires, then hidden, unreadable by ID, and purged from disk")
    func fade() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let now = Date()
            let keep = try vault.add(photo(randomBytes(20), name: "keep.jpg"), now: now)
            let fading = try vault.add(photo(randomBytes(20), name: "boarding.png", compartment: .fade,
                                             expires: now.addingTimeInterval(1)), now: now)
            #expect(fading.compartment == .fade)
            #expect(fading.expires != nil)

            #expect(Set(try vault.items(now: now).map(\.id)) == [keep.id, fading.id])
            #expect(try vault.item(matching: fading.id, now: now).id == fading.id)

            let later = now.addingTimeInterval(2)
            #expect(try vault.items(now: later).map(\.id) == [keep.id])
            #expect(Set(try vault.items(includeExpired: true, now: later).map(\.id)) == [keep.id, fading.id])
            let error = expectVaultError("itemExpired") { _ = try vault.item(matching: fading.id, now: later) }
            #expect(error?.kind == .missingInput)
            expectVaultError("itemExpired") { _ = try vault.item(matching: String(fading.id.prefix(8)), now: later) }

            // Nothing to purge yet.
            #expect(try vault.purgeExpired(now: now).isEmpty)
            let content = vault.contentPath(of: fading)
            #expect(try exists(content) && TestCatalogue.record(id: fading.id, in: vault.path) != nil)

            let purged = try vault.purgeExpired(now: later)
            #expect(purged.map(\.id) == [fading.id])
            #expect(!exists(content))
            #expect(try TestCatalogue.record(id: fading.id, in: vault.path) == nil)
            #expect(exists(vault.contentPath(of: keep)))

            let reopened = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: false)
            #expect(try reopened.items(includeExpired: true, now: later).map(\.id) == [keep.id])
            expectVaultError("itemNotFound") { _ = try reopened.item(matching: fading.id, now: later) }
        }
    }

    @Test("fade without expiry, or an expiry outside fade, is invalidCompartmentUse and adds nothing")
    func fadeRules() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let soon = Date().addingTimeInterval(60)
            let e = expectVaultError("invalidCompartmentUse") { _ = try vault.add(photo([1], compartment: .fade)) }
            #expect(e?.kind == .usage)
            expectVaultError("invalidCompartmentUse") { _ = try vault.add(photo([1], compartment: .vault, expires: soon)) }
            expectVaultError("invalidCompartmentUse") { _ = try vault.add(note("x", compartment: .backup, expires: soon)) }
            #expect(try vault.items(includeExpired: true).isEmpty)
            for sub in ["Photos", "Notes"] { #expect(listing(of: dir + "/vault/" + sub).isEmpty) }
            #expect(try TestCatalogue.records(in: dir + "/vault").isEmpty)
        }
    }

    @Test("item names must be 1…255 bytes without '/' or NUL")
    func names() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            for bad in ["", "a/b", "../x", "nul\u{0}", String(repeating: "x", count: 256)] {
                let e = expectVaultError("invalidName") { _ = try vault.add(photo([1], name: bad)) }
                #expect(e?.kind == .usage)
            }
            #expect(try vault.items().isEmpty)
            _ = try vault.add(photo([1], name: String(repeating: "x", count: 255)))
            _ = try vault.add(photo([1], name: "Ünïcødé .jpg"))
        }
    }

    // MARK: locking

    @Test("a second open for writing, even in the same process, is busy and names this PID")
    func locking() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let path = dir + "/vault"
            do {
                let first = try Vault.open(at: path, keyStore: store, forWriting: true)
                try withExtendedLifetime(first) {
                    let error = expectVaultError("busy") { _ = try Vault.open(at: path, keyStore: store, forWriting: true) }
                    #expect(error?.kind == .busy)
                    if case .busy(_, let holder)? = error { #expect(holder == getpid()) }
                    #expect(error?.description.contains("\(getpid())") == true)
                    // Readers do not need the lock.
                    _ = try Vault.open(at: path, keyStore: store, forWriting: false).items()
                }
            }
            // The first vault is gone, so is its lock.
            _ = try Vault.open(at: path, keyStore: store, forWriting: true)
        }
    }

    @Test("lockWait waits for the holder to go away")
    func lockWait() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let path = dir + "/vault"
            _ = try Vault.open(at: path, keyStore: store, forWriting: true)
            // Hold the lock from another open file description for ~0.3 s.
            let fd = open(path + "/.lock", O_RDWR | O_CLOEXEC)
            #expect(fd >= 0)
            #expect(flock(fd, LOCK_EX | LOCK_NB) == 0)
            let release = Thread { usleep(300_000); close(fd) }
            release.start()
            _ = try Vault.open(at: path, keyStore: store, forWriting: true, lockWait: 5)
        }
    }

    // MARK: leftovers

    @Test("opening for writing removes temp files, keeps real items, and never deletes content it cannot account for")
    func leftovers() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let path = dir + "/vault"
            let photoBytes = randomBytes(3000)
            let (realPhoto, realNote) = try {
                let vault = try Vault.open(at: path, keyStore: store, forWriting: true)
                return (try vault.add(photo(photoBytes)), try vault.add(note("hello")))
            }()

            let orphanPhoto = path + "/Photos/\(UUID().uuidString).n11"
            let orphanNote = path + "/Notes/\(UUID().uuidString).n11note"
            let temps = [path + "/Photos/.n11tmp-x", path + "/Notes/.n11tmp-y",
                         path + "/.n11tmp-w"]
            for file in temps + [orphanPhoto, orphanNote] { try writeBytes(randomBytes(40), to: file) }

            // Readers leave them alone (a writer might be mid-add).
            let reader = try Vault.open(at: path, keyStore: store, forWriting: false)
            #expect(try reader.items().count == 2)
            for file in temps + [orphanPhoto, orphanNote] { #expect(exists(file)) }

            let writer = try Vault.open(at: path, keyStore: store, forWriting: true)
            for file in temps { #expect(!exists(file), "\(file) was not cleaned") }
            // Content without a row is only ever removed by a committed step (our own writes
            // stage content, so they never leave one in place): a file someone put there, or
            // one an old version left, may be all that is left of an item, and stays.
            for file in [orphanPhoto, orphanNote] { #expect(exists(file), "\(file) was deleted by guessing") }
            #expect(Set(try writer.items().map(\.id)) == [realPhoto.id, realNote.id])
            #expect(try plaintext(of: realPhoto, in: writer) == photoBytes)
            #expect(try plaintext(of: realNote, in: writer) == Array("hello".utf8))
            #expect(exists(writer.contentPath(of: realPhoto)) && exists(writer.contentPath(of: realNote)))
            #expect(exists(path + "/.n11vault"))
        }
    }

    // MARK: lookup by ID

    @Test("item(matching:): full ID, unique 6-char prefix, lower case; short prefixes must match exactly")
    func lookup() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            var items: [ItemMetadata] = []
            for i in 0..<8 { items.append(try vault.add(photo([UInt8(i)], name: "p\(i)"))) }

            for item in items {
                #expect(try vault.item(matching: item.id).id == item.id)
                #expect(try vault.item(matching: item.id.lowercased()).id == item.id)
                let others = items.filter { $0.id != item.id }
                let six = String(item.id.prefix(6))
                if !others.contains(where: { $0.id.hasPrefix(six) }) {
                    #expect(try vault.item(matching: six).id == item.id)
                    #expect(try vault.item(matching: six.lowercased()).id == item.id)
                }
                // Fewer than 4 characters are never a prefix, even if unique.
                let e = expectVaultError("prefixTooShort") { _ = try vault.item(matching: String(item.id.prefix(3))) }
                #expect(e?.kind == .usage)
                expectVaultError("prefixTooShort") { _ = try vault.item(matching: String(item.id.prefix(1))) }
            }
            expectVaultError("itemNotFound") { _ = try vault.item(matching: UUID().uuidString) }
            expectVaultError("itemNotFound") { _ = try vault.item(matching: "") }
        }
    }
}

@Suite("FadeDuration")
struct FadeDurationTests {
    @Test("valid durations", arguments: [("90s", 90.0), ("30m", 1800), ("12h", 43200), ("7d", 604800),
                                         ("2w", 1_209_600), ("1.5h", 5400)])
    func valid(text: String, seconds: Double) throws {
        #expect(try FadeDuration.seconds(from: text) == seconds)
    }

    @Test("invalid durations", arguments: ["", "7", "d", "-1d", "0s", "1y", "7 d", "s7", "1D", "nan s", "6000w"])
    func invalid(text: String) {
        let error = expectVaultError("invalidDuration") { _ = try FadeDuration.seconds(from: text) }
        #expect(error?.kind == .usage)
    }
}
