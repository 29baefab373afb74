import Foundation
import Testing
@testable import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// Version 3 create in two passes over the catalogue (issue 34): a first pass that keeps a
/// few numbers per page, and pages made again from the catalogue while libzip writes. What
/// must hold: the catalogue is read in ID order from any ID, the archive lists exactly the
/// live items of its compartments (other compartments and expired fade items interleaved
/// with them in ID order), and a page that comes out otherwise the second time is refused.
@Suite("Version 3 create streams the catalogue")
struct StreamingCreateTests {
    /// 1,200 notes over three compartments, every seventh fade item already expired.
    static func mixedVault(in dir: String, now: Date) throws -> (KeyStore, Vault, [String: [UInt8]]) {
        let (store, vault) = try makeVault(in: dir, name: "home")
        var items: [Vault.NewItem] = [], texts: [[UInt8]] = []
        for i in 0..<1200 {
            let text = Array("note \(i) ".utf8) + randomBytes(i % 40)
            let compartment: Compartment = [.vault, .fade, .backup][i % 3]
            let expires = compartment == .fade ? now.addingTimeInterval(i % 7 == 0 ? -60 : 86400) : nil
            items.append(note(text, name: "n\(i).txt", compartment: compartment, expires: expires))
            texts.append(text)
        }
        let added = try vault.add(items, now: now.addingTimeInterval(-3600))
        var byID: [String: [UInt8]] = [:]
        for (item, text) in zip(added, texts) { byID[item.id] = text }
        return (store, vault, byID)
    }

    @Test("the catalogue in ID order, from any ID, in batches, and stopped when asked")
    func catalogueInIDOrder() throws {
        try withTemporaryDirectory { dir in
            let (_, vault, byID) = try Self.mixedVault(in: dir, now: Date())
            let sorted = byID.keys.sorted()
            var seen: [String] = [], batches = 0
            try vault.forEachItemInIDOrder(batchSize: 100) { batch, damaged in
                #expect(damaged.isEmpty && batch.count <= 100)
                seen += batch.map(\.id)
                batches += 1
                return true
            }
            #expect(seen == sorted, "every item once, in ID order (expired ones too)")
            #expect(batches == 12)
            var fromMiddle: [String] = []
            try vault.forEachItemInIDOrder(from: sorted[700], batchSize: 64) { batch, _ in
                fromMiddle += batch.map(\.id)
                return fromMiddle.count < 200
            }
            #expect(fromMiddle == Array(sorted[700..<(700 + 256)]), "from an ID on, stopped after the batch that said so")

            // A whole walk stopped, or ended by the caller's error (which reaches it as it is),
            // gives no batch more.
            var taken = 0
            try vault.forEachItemInIDOrder(batchSize: 100) { _, _ in
                taken += 1
                return taken < 3
            }
            #expect(taken == 3)
            struct Enough: Error {}
            taken = 0
            #expect(throws: Enough.self) {
                try vault.forEachItemInIDOrder(batchSize: 100) { _, _ in
                    taken += 1
                    if taken == 5 { throw Enough() }
                    return true
                }
            }
            #expect(taken == 5)
            // A record that does not open is named beside the batch it is in, and the walk goes on.
            try TestCatalogue.flipRecordByte(id: sorted[250], at: 40, in: vault.path)
            var found: [String] = [], damagedIn: [Int: [String]] = [:], batch = 0
            try vault.forEachItemInIDOrder(batchSize: 100) { items, damaged in
                if !damaged.isEmpty { damagedIn[batch] = damaged }
                found += items.map(\.id)
                batch += 1
                return true
            }
            #expect(found == sorted.filter { $0 != sorted[250] })
            #expect(damagedIn == [2: [sorted[250]]])
        }
    }

    @Test("small packs over many pages: exactly the live items of the chosen compartments, each byte for byte", arguments: [ArchiveMode.portable, .secure])
    func selectionAcrossPages(mode: ArchiveMode) throws {
        try withTemporaryDirectory { dir in
            let now = Date()
            let (store, vault, byID) = try Self.mixedVault(in: dir, now: now)
            let path = dir + "/mixed.nu11vlt"
            var request = ArchiveCreator.Request(mode: mode, compartments: [.vault, .fade], output: path, replaceExisting: false,
                                                 kdf: fastKDF, now: now, formatVersion: 3)
            request.packTarget = 2048
            request.pageAverage = 64
            let report = try ArchiveCreator.create(from: vault, request) { ArchiveAccess(passwords: [try secret(testPassword)], kdf: fastKDF) }
            let all = try vault.items(includeExpired: true, now: now)
            let expected = all.filter { [.vault, .fade].contains($0.compartment) && !$0.isExpired(at: now) }
            let expired = all.filter { $0.compartment == .fade && $0.isExpired(at: now) }
            #expect(report.items == expected.count && report.newItems == expected.count)
            #expect(report.plaintextBytes == expected.reduce(0) { $0 + $1.size })
            #expect(try Set(report.skippedExpired) == Set(expired.map(\.id)) && !expired.isEmpty)

            let archive = try unlock(path, keyStore: store)
            #expect((try archive.items.all()).map(\.id) == expected.map(\.id).sorted())
            let pages = try RawZip.entries(of: readBytes(path)).filter { $0.nameString.hasSuffix(".n11page") }
            // Pages end where the writer's rule says, whatever the random IDs (about 12 here, one item in 64 ending a page).
            let ids = try expected.map { try #require(ManifestRecord.idBytes($0.id)) }.sorted { $0.lexicographicallyPrecedes($1) }
            #expect(pages.count == (try ids.dropLast().filter { try PackedLayout.endsPage(after: $0, average: 64) }.count) + 1)
            let exported = dir + "/export"
            let restored = try ArchiveExporter.export(archive, to: exported, keyStore: store, .init(overwrite: false, dryRun: false))
            #expect(try restored.restored.count == expected.count)
            for item in expected {
                #expect(try readBytes(exported + "/Notes/" + item.name) == byID[item.id], "\(item.name)")
            }
        }
    }

    @Test("where each item is goes into the record a page at a time, staged under the archive's ID until the night is recorded")
    func shipmentStaged() throws {
        try withTemporaryDirectory { dir in
            let now = Date()
            let (_, vault, _) = try Self.mixedVault(in: dir, now: now)
            let record = try ShipmentRecord.open(in: N11Home(root: dir + "/home"))
            var request = ArchiveCreator.Request(mode: .portable, compartments: [.backup], output: dir + "/b.nu11vlt",
                                                 replaceExisting: false, kdf: fastKDF, now: now, formatVersion: 3)
            request.packTarget = 2048
            request.shipmentRecord = record
            let report = try ArchiveCreator.create(from: vault, request) { ArchiveAccess(passwords: [try secret(testPassword)], kdf: fastKDF) }
            let state = ShipmentRecord.Destination(mode: .portable, access: "password", vaultKeys: "", lastArchive: report.archiveID,
                                                   listArchive: report.archiveID, listRootSHA256: report.listRootSHA256,
                                                   archives: [report.archiveID: .init(id: report.archiveID, name: "b.nu11vlt",
                                                                                      size: report.archiveBytes, created: now)])
            // A page fewer staged than the archive lists (one lost): refused, nothing recorded.
            #expect(throws: (any Error).self) {
                try record.replace("/backups", with: state, stagedNight: report.archiveID, items: report.items, pages: report.manifestPages + 1)
            }
            #expect(try record.destination("/backups") == nil)
            try record.replace("/backups", with: state, stagedNight: report.archiveID, items: report.items, pages: report.manifestPages)
            #expect(try record.pages(of: "/backups").count == report.manifestPages && report.manifestPages > 0)
            let rows = try record.items(of: "/backups")
            var recorded: [String: ShipmentRecord.Item] = [:]
            while let (id, item) = try rows.next() { recorded[id] = item }
            let backup = try vault.items(now: now).filter { $0.compartment == .backup }
            #expect(Set(recorded.keys) == Set(backup.map(\.id)))
            #expect(recorded.values.allSatisfy { $0.archive == report.archiveID })
            for item in backup { #expect(recorded[item.id]?.sha256 == item.sha256 && recorded[item.id]?.size == item.size) }
            #expect(try record.destination("/backups")?.itemCount == backup.count)
            // Taken: replacing again from the same night finds fewer rows staged than the
            // archive lists, is refused, and the record stays as it was.
            #expect(throws: (any Error).self) {
                try record.replace("/backups", with: state, stagedNight: report.archiveID, items: report.items, pages: report.manifestPages)
            }
            #expect(try record.destination("/backups")?.itemCount == backup.count)
            // A night whose rows were dropped (not published) records nothing either.
            request = ArchiveCreator.Request(mode: .portable, compartments: [.backup], output: dir + "/c.nu11vlt",
                                             replaceExisting: false, kdf: fastKDF, now: now, formatVersion: 3)
            request.shipmentRecord = record
            let other = try ArchiveCreator.create(from: vault, request) { ArchiveAccess(passwords: [try secret(testPassword)], kdf: fastKDF) }
            record.discard(night: other.archiveID)
            #expect(throws: (any Error).self) {
                try record.replace("/other", with: state, stagedNight: other.archiveID, items: other.items, pages: other.manifestPages)
            }
            #expect(try record.destination("/other") == nil)
        }
    }

    @Test("items read out of order over more pages than are kept: each is the item at its place, and every payload verifies")
    func manyPagesOutOfOrder() throws {
        try withTemporaryDirectory { dir in
            let (store, vault) = try makeVault(in: dir, name: "home")
            // Page ends are a property of the random IDs: notes are added until they make
            // twice as many pages as the reader keeps, and more (one item in 256 ends a page).
            var total = 0, ends = 0
            while ends < 2 * PackedContents.pagesKept + 1 {
                let added = try vault.add((total..<(total + 2000)).map { note(Array("note \($0)".utf8), name: "n\($0).txt") })
                total += added.count
                ends += try added.filter { try PackedLayout.endsPage(after: try #require(ManifestRecord.idBytes($0.id)), average: 256) }.count
            }
            let path = dir + "/many.nu11vlt"
            var request = ArchiveCreator.Request(mode: .portable, compartments: [.vault], output: path, replaceExisting: false,
                                                 kdf: fastKDF, formatVersion: 3)
            request.pageAverage = 256
            _ = try ArchiveCreator.create(from: vault, request) { ArchiveAccess(passwords: [try secret(testPassword)], kdf: fastKDF) }
            let archive = try unlock(path, keyStore: store)
            let all = try archive.items.all()
            let pages = try RawZip.entries(of: readBytes(path)).filter { $0.nameString.hasSuffix(".n11page") }.count
            #expect(pages > 2 * PackedContents.pagesKept, "more pages than the reader keeps: \(pages)")
            // Back and forth across the archive, so kept pages are let go and read again.
            for index in [total - 1, 0, total / 2, total - 2, 1, total * 3 / 4, 10, total * 5 / 6, 2, total - 1] {
                #expect(try archive.items.item(index) == all[index], "item \(index)")
            }
            #expect(Set(all.map(\.name)).count == total)
            // Every payload while the main thread takes items page by page (the worker reads
            // packs at the same time through its own reader).
            #expect(try ArchiveVerifier.verify(archive, keyStore: store).items == total)
        }
    }

    @Test("each page is made once while its parts are taken (the page entry and every segment of its packs) and let go after the last")
    func segmentsTakeEachPageOnce() throws {
        try withTemporaryDirectory { dir in
            let now = Date()
            let (_, vault, _) = try Self.mixedVault(in: dir, now: now)
            var selection = PackedLayout.Selection(compartments: [.vault, .fade, .backup], now: now, mode: .portable,
                                                   packTarget: 2048, reused: nil)
            selection.segmentTarget = 300
            selection.pageAverage = 64
            let layout = try PackedLayout(vault: vault, selection)
            #expect(layout.pages.count > 5 && layout.pages.contains { $0.packs.contains { $0.segments > 2 } })
            let pages = PackedPages(vault: vault, layout: layout, selection: selection)
            var items = 0
            for page in layout.pages {
                // Segments first (as lanes ahead of the writer take them), the page entry last.
                for pack in page.packs {
                    var inPack = 0
                    for segment in 0..<pack.segments {
                        let taken = try pages.takeSegment(pack: pack.number, segment: segment)
                        #expect(!taken.isEmpty)
                        inPack += taken.count
                    }
                    #expect(inPack == pack.itemCount)
                    items += inPack
                }
                #expect(pages.pagesHeld == (page.packs.isEmpty ? 0 : 1), "held until its page entry is taken")
                _ = try pages.takePage(page.number)
                #expect(pages.pagesHeld == 0, "let go once every part was taken")
            }
            #expect(pages.pagesMade == layout.pages.count, "no page made twice")
            #expect(items == layout.newItems)
        }
    }

    @Test("a page that comes out otherwise the second time (the vault changed between the passes) is refused")
    func changedBetweenPasses() throws {
        try withTemporaryDirectory { dir in
            let now = Date()
            let (_, vault, byID) = try Self.mixedVault(in: dir, now: now)
            let selection = PackedLayout.Selection(compartments: [.vault, .fade, .backup], now: now, mode: .portable,
                                                   packTarget: 2048, reused: nil)
            let layout = try PackedLayout(vault: vault, selection)
            #expect(layout.itemCount == byID.count - layout.skippedExpired.count)
            let last = try #require(layout.pages.last)
            let made = try PackedPages(vault: vault, layout: layout, selection: selection).takePage(last.number)
            let records = try ManifestPage.parse(made.plaintext, mode: .portable, dependencies: 0, what: "page")
            #expect(records.count == last.itemCount, "made again as planned")
            try #require(records.count > 1, "a page of one item has no ID inside it")
            let lastID = try #require(records.last?.idString)
            // An item added within the last page changes it (the same vault object holds the
            // lock; nothing else could): its ID between the page's first and last (one after
            // its last would leave the page as it was).
            var extra: ItemMetadata
            repeat { extra = try vault.add(note(Array("late".utf8), name: "late.txt")) } while !(last.firstID < extra.id && extra.id < lastID)
            let pages = PackedPages(vault: vault, layout: layout, selection: selection)
            do {
                _ = try pages.takePage(last.number)
                Issue.record("a changed page was taken")
            } catch let error as SystemError {
                #expect("\(error)".contains("the vault changed while the archive was written"), "\(error)")
            }
        }
    }
}
