import Foundation
import Testing
@testable import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// Issue 27: incremental archives (DESIGN.md §8.3). Nights of `ArchiveBackup` into a local
/// directory, each built on this home's record of what it shipped there; every night
/// restores to exactly its own vault, from the archives beside it, found by ID.
@Suite("Incremental archives: nights that cost what changed")
struct IncrementalArchiveTests {
    final class World {
        let dir: String
        let home: N11Home
        let store: KeyStore
        let vault: Vault
        let backups: String
        let directory: LocalDirectoryStore
        var night = 0
        let start = Date(timeIntervalSince1970: 1_795_000_000)
        /// Per night: the archive's path and the vault's items then (ID → SHA-256).
        var nights: [(path: String, items: [String: String], report: ArchiveCreator.Report)] = []
        var plaintexts: [String: [UInt8]] = [:]
        /// Where every night's pages end (small: many pages of few items).
        let pageAverage: UInt64
        /// The most items a page holds (1: a page an item).
        let pageCap: Int
        /// Portable (a password) or secure (the home's keys).
        let mode: ArchiveMode

        init(dir: String, items: Int = 40, pageAverage: UInt64 = PackedLayout.averagePageItems,
             pageCap: Int = PackedLayout.pageItemsCap, mode: ArchiveMode = .portable) throws {
            self.dir = dir
            self.pageAverage = pageAverage
            self.pageCap = pageCap
            self.mode = mode
            home = N11Home(root: dir + "/home")
            store = try KeyStore.create(in: home, pin: nil, signing: true)
            vault = try Vault.open(at: home.defaultVaultPath, keyStore: store, forWriting: true)
            backups = dir + "/backups"
            try makeDirectory(backups)
            directory = try LocalDirectoryStore(backups, forPrune: false)
            for _ in 0..<items { try add() }
        }

        @discardableResult
        func add() throws -> ItemMetadata {
            let bytes = randomBytes(Int.random(in: 0...3000))
            let item = try vault.add(note(bytes, name: "n\(plaintexts.count).txt"))
            plaintexts[item.id] = bytes
            return item
        }

        func removeOne() throws {
            let items = try vault.items()
            try vault.remove(items[Int.random(in: 0..<items.count)])
        }

        var state: [String: String] { get throws { Dictionary(uniqueKeysWithValues: try vault.items().map { ($0.id, $0.sha256) }) } }

        /// One night's archive (incremental unless `full`).
        @discardableResult
        func backUp(full: Bool = false, fullEvery: TimeInterval = 365 * 86_400, skipIfUnchanged: Bool = false,
                    password: String = testPassword, at time: Date? = nil, compartments: Set<Compartment> = [.vault, .fade],
                    through store: (any ArchiveStore)? = nil) throws -> ArchiveBackup.Report {
            night += 1
            var request = ArchiveBackup.Request(mode: mode, compartments: compartments, kdf: fastKDF,
                                                destination: .store(store ?? directory, name: nil, PublishOptions(lockWait: 0)),
                                                home: home, now: time ?? start.addingTimeInterval(Double(night) * 86_400))
            request.access = mode == .portable ? "password" : ""
            request.pageAverage = pageAverage
            request.pageCap = pageCap
            if !full { request.incremental = .init(fullEvery: fullEvery, skipIfUnchanged: skipIfUnchanged) }
            let report = try ArchiveBackup.run(from: vault, request, progress: nil) { [mode] in
                mode == .portable ? ArchiveAccess(passwords: [try secret(password)], kdf: fastKDF) : ArchiveAccess(kdf: fastKDF)
            }
            if let archive = report.archive {
                let items = try vault.items().filter { compartments.contains($0.compartment) }
                nights.append((report.location, Dictionary(uniqueKeysWithValues: items.map { ($0.id, $0.sha256) }), archive))
            }
            return report
        }

        func sources(salvaging: Bool = false) -> UnlockSources {
            let sources = UnlockSources(password: { _ in try secret(testPassword) }, keyStore: { self.store },
                                        keyStoreExists: { true }, identityFiles: { [] })
            sources.dependencies = StoreDependencies(directory)
            return sources
        }

        func open(_ path: String, salvaging: Bool = false) throws -> UnlockedArchive {
            try ArchiveReader(path: path, salvaging: salvaging).unlock(with: sources(), kdfCeiling: .standard,
                                                                        toleratingMissingItems: salvaging)
        }

        /// Restores `path` into a new vault; its items (ID → SHA-256), each checked to be the
        /// bytes added.
        func restored(_ path: String, salvage: Bool = false) throws -> (items: [String: String], report: ArchiveRestorer.Report) {
            let target = dir + "/restored-\(UUID().uuidString)"
            let into = try Vault.open(at: target, keyStore: store, forWriting: true)
            let report = try ArchiveRestorer.restore(try open(path, salvaging: salvage), into: into, .init(salvage: salvage))
            var items: [String: String] = [:]
            for item in try into.items() {
                let bytes = try plaintext(of: item, in: into)
                #expect(bytes == plaintexts[item.id], "item \(item.id) restored with other bytes")
                items[item.id] = item.sha256
            }
            return (items, report)
        }
    }

    @Test("30 nights of adds and removals: each night restores to its own vault; an unchanged night is a small 'same as' archive; the newest needs no history replay; with many pages, a night writes only the pages that changed (portable and secure)",
          arguments: zip([PackedLayout.averagePageItems, 4, 4], [ArchiveMode.portable, .portable, .secure]))
    func thirtyNights(pageAverage: UInt64, mode: ArchiveMode) throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir, pageAverage: pageAverage, mode: mode)
            try w.backUp()
            #expect(w.nights[0].report.dependsOn.isEmpty, "the first night is full")
            #expect(try ArchiveReader(path: w.nights[0].path).header.mode == mode)
            for night in 2...30 {
                if night % 7 == 0 {
                    // Nothing changed.
                    let report = try #require(try w.backUp().archive)
                    #expect(report.newItems == 0 && report.archiveBytes < 8192, "an unchanged night wrote \(report.archiveBytes) bytes")
                    #expect(report.manifestPages == 0 && report.listArchive != report.archiveID, "a 'same as' root, not a page list")
                    continue
                }
                let removals = night % 3 == 0 ? 1 : 0
                if removals == 1 { try w.removeOne() }
                for _ in 0..<2 { try w.add() }
                let report = try #require(try w.backUp().archive)
                #expect(report.newItems == 2 && !report.dependsOn.isEmpty, "night \(night): \(report.newItems) new")
                // An added item changes its page (two, if its ID ends one); a removed one its
                // page (and the next, if its ID ended one, into one). The others are pointed at.
                #expect(report.manifestPages - report.pagesReused <= 2 * 2 + removals,
                        "night \(night): \(report.manifestPages - report.pagesReused) of \(report.manifestPages) pages written")
                if report.manifestPages > 2 * 2 + removals { #expect(report.pagesReused > 0, "night \(night)") }
                // What a changed night adds: the changed plaintext, 16 bytes per changed item
                // (the chunk tag), 100 bytes per vault item (the manifest), and 8 KiB.
                let items = try w.vault.items()
                #expect(report.archiveBytes <= report.newBytes + 16 * 2 + 100 * Int64(items.count) + 8192,
                        "night \(night): \(report.archiveBytes) bytes for \(report.newBytes) new")
            }
            #expect(w.nights.count == 30)
            let newest = try w.restored(w.nights[29].path)
            #expect(newest.items == w.nights[29].items)
            for night in [0, 6, 13, 20] {
                #expect(try w.restored(w.nights[night].path).items == w.nights[night].items, "night \(night + 1)")
            }
            // One password derivation for the whole chain: every night keeps the full
            // night's salt and cost.
            let salts = Set(try w.nights.map { try ArchiveReader(path: $0.path).header.passwordKDFs.map(\.salt) })
            #expect(salts.count == 1, "\(salts.count) different password salts in one chain")
            // Every dependency is named in the header, and every one holds an item or a page
            // of the manifest: nothing is read that the night does not need.
            let reader = try ArchiveReader(path: w.nights[29].path)
            let heldBy = Set(try w.open(w.nights[29].path).items.all().compactMap(\.heldBy))
            let pageHolders = Set(try ShipmentRecord.open(in: w.home).pages(of: w.directory.location).map(\.archive))
            #expect(pageHolders.contains(reader.header.archiveIDHex), "the last night wrote a page")
            #expect(Set(reader.header.dependsOn.map(\.hex)).subtracting(heldBy).subtracting(pageHolders).isEmpty, "archives named but not needed")
            if pageAverage < 40 { #expect(pageHolders.count > 1, "pages of earlier nights pointed at") }
        }
    }

    @Test("an unchanged night reports what the one walk that decided it saw (items, bytes, expired items, compartments left out), as the full night did; a record that stopped opening still fails it")
    func unchangedNightCounts() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir, items: 5)
            let t0 = Date()
            let soon = try w.vault.add(note(Array("gone soon".utf8), name: "soon.txt", compartment: .fade, expires: t0.addingTimeInterval(3600)))
            for n in 0..<2 { try w.vault.add(note(randomBytes(10), name: "b\(n).txt", compartment: .backup)) }
            let first = try w.backUp(at: t0.addingTimeInterval(7200))
            let full = try #require(first.archive)
            #expect(full.dependsOn.isEmpty && full.items == 5 && full.skippedExpired == [soon.id] && first.leftOut == [.backup: 2])
            #expect(full.plaintextBytes == w.plaintexts.values.reduce(0) { $0 + Int64($1.count) })

            let second = try w.backUp(at: t0.addingTimeInterval(7201))
            let unchanged = try #require(second.archive)
            #expect(unchanged.newItems == 0 && unchanged.archiveBytes < 8192, "not a 'same as' night: \(unchanged.archiveBytes) bytes")
            #expect(unchanged.items == full.items && unchanged.plaintextBytes == full.plaintextBytes)
            #expect(unchanged.skippedExpired == [soon.id] && second.leftOut == [.backup: 2])
            let skipped = try w.backUp(skipIfUnchanged: true, at: t0.addingTimeInterval(7202))
            #expect(skipped.archive == nil && skipped.leftOut == [.backup: 2])

            // A new item whose record no longer opens is not seen by the walk, which then finds
            // the night unchanged: the archive's own pass must still refuse it, as a full
            // create does, rather than publish a night without it.
            let added = try w.add()
            try TestCatalogue.flipRecordByte(id: added.id, at: 40, in: w.vault.path)
            let files = try FileManager.default.contentsOfDirectory(atPath: w.backups)
            for skip in [false, true] {
                do {
                    let report = try w.backUp(skipIfUnchanged: skip, at: t0.addingTimeInterval(7203))
                    Issue.record("skipIfUnchanged \(skip): a night with a damaged record passed: \(String(describing: report.archive?.path))")
                } catch {
                    #expect("\(error)".contains(added.id), "\(error)")
                }
                #expect(try FileManager.default.contentsOfDirectory(atPath: w.backups).sorted() == files.sorted())
            }
        }
    }

    @Test("a dependency missing: a plain restore names it (66), a salvage restores every item whose bytes are there and names the rest")
    func missingDependency() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir)
            try w.backUp()
            for _ in 0..<3 { try w.add() }
            try w.backUp()
            for _ in 0..<3 { try w.add() }
            try w.backUp()
            let middle = w.nights[1]
            try FileSystem.removeFile(middle.path)
            expectArchiveError("dependencyMissing", kind: .missingInput) { _ = try w.open(w.nights[2].path) }
            let salvaged = try w.restored(w.nights[2].path, salvage: true)
            let lost = Set(middle.items.keys).subtracting(w.nights[0].items.keys)
            #expect(Set(salvaged.report.damaged.map(\.id)) == lost)
            #expect(salvaged.items.count == w.nights[2].items.count - lost.count)
        }
    }

    /// The destination as a night sees it, with `beforeLock` run once the night is past the
    /// decision `--skip-if-unchanged` makes before the store's lock, and before the lock is
    /// taken: what another process may do to the destination or the vault in between.
    final class InterposedStore: ArchiveStore {
        let inner: any ArchiveStore
        let beforeLock: () throws -> Void

        init(_ inner: any ArchiveStore, beforeLock: @escaping () throws -> Void) {
            self.inner = inner
            self.beforeLock = beforeLock
        }

        var location: String { inner.location }
        func location(of name: String) -> String { inner.location(of: name) }
        func list() throws(ArchiveError) -> [StoredObject] { try inner.list() }
        func keyEntries(of object: StoredObject) throws(ArchiveError) -> ArchiveKeyEntries? { try inner.keyEntries(of: object) }
        func fetch(_ object: StoredObject, progress: ArchiveProgress?) throws(ArchiveError) -> FetchedArchive {
            try inner.fetch(object, progress: progress)
        }
        func delete(_ object: StoredObject) throws(ArchiveError) { try inner.delete(object) }
        func finishDeleting() throws(ArchiveError) { try inner.finishDeleting() }
        func lock(exclusive: Bool, waitSeconds: Double) throws(ArchiveError) -> any ArchiveStoreLock {
            try inner.lock(exclusive: exclusive, waitSeconds: waitSeconds)
        }
        func removeLeftovers(dryRun: Bool) -> Int { inner.removeLeftovers(dryRun: dryRun) }
        func recorded(_ object: StoredObject, in records: [WrittenArchives.Record]) -> WrittenArchives.Record? {
            inner.recorded(object, in: records)
        }
        func publishNew(name: String?, at date: Date, _ options: PublishOptions,
                        make: (NewArchiveFile) throws -> ArchiveCreator.Report) throws -> Publication {
            try beforeLock()
            return try inner.publishNew(name: name, at: date, options, make: make)
        }
        func check(_ object: StoredObject, against record: WrittenArchives.Record, home: N11Home) throws(ArchiveError) -> RecordMatch {
            try inner.check(object, against: record, home: home)
        }
    }

    @Test("--skip-if-unchanged decides before the store's lock and again under it: a prune in between makes the night full, a change undone in between makes it a 'same as' night; each restores to its vault")
    func decidedAgainUnderTheLock() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir, items: 30, pageAverage: 4)
            try w.backUp()
            try w.add()
            #expect(try w.backUp().archive?.newItems == 1)
            // Changed: decided incremental on the first two nights; then a prune took the second.
            try w.add()
            let pruned = InterposedStore(w.directory) { try FileSystem.removeFile(w.nights[1].path) }
            let afterPrune = try w.backUp(skipIfUnchanged: true, through: pruned)
            #expect(afterPrune.fullBecause?.contains("no longer there") == true, "\(String(describing: afterPrune.fullBecause))")
            #expect(afterPrune.archive?.dependsOn == [] && afterPrune.archive?.newItems == 32)
            #expect(try w.restored(w.nights[2].path).items == w.nights[2].items)
            // Changed when decided; the change undone before the lock: unchanged under it.
            let extra = try w.add()
            let undone = InterposedStore(w.directory) { try w.vault.remove(extra) }
            let same = try #require(try w.backUp(skipIfUnchanged: true, through: undone).archive)
            #expect(same.newItems == 0 && same.manifestPages == 0 && same.listArchive == w.nights[2].report.archiveID,
                    "\(same.newItems) new items, \(same.manifestPages) pages")
            #expect(w.nights[3].items == w.nights[2].items)
            #expect(try w.restored(w.nights[3].path).items == w.nights[2].items)
        }
    }

    @Test("nights of other compartments than the night before stay incremental (secure ones too: no compartment's key changed); each restores to its compartments' items; the items the last night did not list are shipped anew",
          arguments: [ArchiveMode.portable, .secure])
    func compartmentsBetweenNights(mode: ArchiveMode) throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir, items: 30, pageAverage: 4, mode: mode)
            // After every night's date and the clock of whoever runs the test for years to come.
            let later = max(w.start, Date()).addingTimeInterval(20 * 365 * 86_400)
            for n in 0..<10 {
                let bytes = randomBytes(Int.random(in: 1...500))
                let item = try w.vault.add(note(bytes, name: "f\(n).txt", compartment: .fade, expires: later))
                w.plaintexts[item.id] = bytes
            }
            let both = try #require(try w.backUp().archive)
            #expect(both.items == 40)
            let vaultOnly = try w.backUp(compartments: [.vault])
            let fadeOnly = try w.backUp(compartments: [.fade])
            let bothAgain = try w.backUp()
            for (n, report) in [vaultOnly, fadeOnly, bothAgain].enumerated() {
                let archive = try #require(report.archive)
                #expect(w.nights[n + 1].items.count == [30, 10, 40][n])
                #expect(try w.restored(w.nights[n + 1].path).items == w.nights[n + 1].items, "night \(n + 2)")
                #expect(try ArchiveVerifier.verify(try w.open(w.nights[n + 1].path), keyStore: w.store).items == w.nights[n + 1].items.count)
                #expect(report.fullBecause == nil, "night \(n + 2): \(String(describing: report.fullBecause))")
                // The record holds what the last night listed: the vault's items after the
                // first night, the fade items after the third. What it does not hold is new.
                #expect(archive.newItems == [0, 10, 30][n], "night \(n + 2): \(archive.newItems) new")
            }
            #expect(vaultOnly.archive?.dependsOn == [both.archiveID])
            #expect(bothAgain.archive?.dependsOn == [try #require(fadeOnly.archive).archiveID], "the fade items from the night that shipped them last")
            // A compartment's key rotated makes a night full only where the last night listed it.
            if mode == .secure {
                try w.vault.rotateKeys(of: [.fade])
                let vaultNight = try w.backUp(compartments: [.vault])
                #expect(vaultNight.fullBecause == nil && vaultNight.archive?.newItems == 0, "the vault key did not change")
                let fadeBack = try w.backUp()
                #expect(fadeBack.fullBecause == nil && fadeBack.archive?.newItems == 10, "the fade items shipped anew, under the new key")
                try w.vault.rotateKeys(of: [.vault])
                let rotated = try w.backUp()
                #expect(rotated.fullBecause?.contains("rotated") == true, "\(String(describing: rotated.fullBecause))")
                for night in w.nights.suffix(3) { #expect(try w.restored(night.path).items == night.items) }
            }
        }
    }

    @Test("key lists compared per compartment: a key changed in a compartment both name is a rotation; a compartment added or left out is not; a list that does not parse, or one empty beside one that is not, is")
    func keyListsCompared() {
        let (a, b, c, d) = (String(repeating: "0a", count: 16), String(repeating: "0b", count: 16),
                            String(repeating: "0c", count: 16), String(repeating: "0d", count: 16))
        #expect(!IncrementalBase.keysRotated(recorded: "", now: ""), "portable nights")
        #expect(!IncrementalBase.keysRotated(recorded: "fade:\(a),vault:\(b)", now: "fade:\(a),vault:\(b)"))
        #expect(!IncrementalBase.keysRotated(recorded: "fade:\(a),vault:\(b)", now: "vault:\(b)"))
        #expect(!IncrementalBase.keysRotated(recorded: "vault:\(b)", now: "backup:\(c),vault:\(b)"))
        #expect(!IncrementalBase.keysRotated(recorded: "fade:\(a)", now: "vault:\(b)"), "no compartment in common")
        #expect(IncrementalBase.keysRotated(recorded: "fade:\(a),vault:\(b)", now: "fade:\(a),vault:\(c)"))
        #expect(IncrementalBase.keysRotated(recorded: "vault:\(b)", now: "backup:\(c),vault:\(d)"))
        // Damaged lists: the night is full.
        for damaged in ["", "vault\(b)", "vault:\(b),vault:\(c)", "xvault:\(b)", "vault:0b", "vault:\(b.dropLast(2))zz", "vault:\(b),"] {
            #expect(IncrementalBase.keysRotated(recorded: damaged, now: "vault:\(b)"), "recorded \(damaged)")
            #expect(IncrementalBase.keysRotated(recorded: "vault:\(b)", now: damaged), "now \(damaged)")
        }
    }

    @Test("at the bound, end to end: a night that needs 256 archives is written and restores; past it, the pages of an archive that holds no needed item are written again; a night that needs 257 archives for its items is full")
    func dependencyBoundEndToEnd() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir, items: 40, pageAverage: 4)
            let initial = Set(w.plaintexts.keys)
            try w.backUp()
            // Nights 2 to 256 add an item each: each night needs every one before it.
            for _ in 2...256 {
                try w.add()
                try w.backUp()
            }
            let at256 = try #require(w.nights.last?.report)
            #expect(at256.dependsOn.count == 255 && at256.newItems == 1)
            // Night 257 takes away one of the first night's items on a page of several: it
            // writes that page, and holds no item. It needs the 256 nights before it.
            let record = try ShipmentRecord.open(in: w.home)
            let pages = try record.pages(of: w.directory.location).sorted { $0.firstID < $1.firstID }
            let sortedInitial = initial.sorted()
            func firstInitialItem(onPage p: Int) -> String? {
                guard pages[p].itemCount > 1 else { return nil }
                let end = p + 1 < pages.count ? pages[p + 1].firstID : nil
                return sortedInitial.first { id in id >= pages[p].firstID && (end.map { id < $0 } ?? true) }
            }
            let taken = try #require(pages.indices.lazy.compactMap(firstInitialItem(onPage:)).first,
                                     "no page of several holds an item of the first night")
            try w.vault.remove(try #require(try w.vault.items().first { $0.id == taken }))
            let pageOnly = try #require(try w.backUp().archive)
            #expect(pageOnly.newItems == 0 && pageOnly.manifestPages > pageOnly.pagesReused && pageOnly.dependsOn.count == 256)
            // Night 258 adds an item: its items need the 256 nights up to the 256th and itself;
            // the page night 257 wrote would be the 257th archive, so it is written again. (An
            // item that would fall on that page would have it written anyway: not that one.)
            let written = try record.pages(of: w.directory.location).sorted { $0.firstID < $1.firstID }
            func onPageOfNight257(_ id: String) -> Bool {
                written.indices.contains { p in
                    written[p].archive == pageOnly.archiveID && id >= written[p].firstID
                        && (p + 1 == written.count || id < written[p + 1].firstID)
                }
            }
            #expect(written.contains { $0.archive == pageOnly.archiveID })
            var added = try w.add()
            while onPageOfNight257(added.id) {
                try w.vault.remove(added)
                w.plaintexts[added.id] = nil
                added = try w.add()
            }
            let atBound = try w.backUp()
            let bounded = try #require(atBound.archive)
            #expect(atBound.fullBecause == nil && bounded.dependsOn.count == 256, "\(String(describing: atBound.fullBecause))")
            #expect(!bounded.dependsOn.contains(pageOnly.archiveID))
            #expect(try w.restored(w.nights[257].path).items == w.nights[257].items)
            #expect(try ArchiveVerifier.verify(try w.open(w.nights[257].path), keyStore: nil).items == w.nights[257].items.count)
            // Night 259 adds one more: 257 archives hold its items. A full night.
            try w.add()
            let past = try w.backUp()
            #expect(past.fullBecause?.contains("more than 256") == true && past.archive?.dependsOn == [], "\(String(describing: past.fullBecause))")
            #expect(try w.restored(w.nights[258].path).items == w.nights[258].items)
        }
    }

    @Test("a night that changed one item points at the earlier pages that did not change; without the archive that holds them a restore stops (66), and a salvage names them as lost and restores the rest")
    func pagesPointedAt() throws {
        try withTemporaryDirectory { dir in
            // Page ends come from the random IDs: of 60 items, about one vault in 850 made 6
            // pages or fewer and failed the first check; of 100, about one in 10 million.
            let w = try World(dir: dir, items: 100, pageAverage: 4)
            let full = try #require(try w.backUp().archive)
            #expect(full.manifestPages > 6 && full.pagesReused == 0)
            let added = try w.add()
            let night = try #require(try w.backUp().archive)
            #expect(night.newItems == 1 && night.pagesReused >= night.manifestPages - 2 && night.pagesReused >= full.manifestPages - 1,
                    "\(night.pagesReused) of \(night.manifestPages) pages pointed at")
            // The record keeps the pages pointed at as the first night wrote them.
            let recorded = try ShipmentRecord.open(in: w.home).pages(of: w.directory.location)
            #expect(recorded.count == night.manifestPages)
            #expect(recorded.filter { $0.archive == full.archiveID }.count == night.pagesReused)
            #expect(recorded.filter { $0.archive == night.archiveID }.count == night.manifestPages - night.pagesReused)
            #expect(try w.restored(w.nights[1].path).items == w.nights[1].items)
            #expect(try ArchiveVerifier.verify(try w.open(w.nights[1].path), keyStore: nil).items == w.nights[1].items.count)
            // The pages the night wrote are found in it; the others only in the first night.
            try FileSystem.removeFile(w.nights[0].path)
            expectArchiveError("dependencyMissing", kind: .missingInput) { _ = try w.open(w.nights[1].path) }
            let salvaged = try w.restored(w.nights[1].path, salvage: true)
            #expect(salvaged.items == [added.id: added.sha256], "only the new item's bytes are in the night")
            #expect(salvaged.report.lostPages.count == night.pagesReused)
            #expect(salvaged.report.lostPages.allSatisfy { $0.problem.contains("missing") }, "\(salvaged.report.lostPages)")
            // Every item but the new one is on a lost page or held by the missing archive.
            let lostOnPages = salvaged.report.lostPages.reduce(0) { $0 + $1.itemCount }
            #expect(lostOnPages + salvaged.report.damaged.count == w.nights[1].items.count - 1)
        }
    }

    @Test("a page held by an archive that is gone or renamed (one that held pages but no items) is written again, and the night stays incremental",
          arguments: [false, true])
    func pageHolderGone(renamed: Bool) throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir, items: 60, pageAverage: 4)
            try w.backUp()
            // A removal: the second night writes the page it was on again; its items stay in the
            // first. (The first item of a page of several: an item alone on its page would take
            // its page away, and the second night would write no page at all.)
            let record = try ShipmentRecord.open(in: w.home)
            let page = try #require(try record.pages(of: w.directory.location).first { $0.itemCount > 1 })
            try w.vault.remove(try #require(try w.vault.items().first { $0.id == page.firstID }))
            let second = try #require(try w.backUp().archive)
            #expect(second.newItems == 0 && second.manifestPages > second.pagesReused)
            #expect(try record.pages(of: w.directory.location).contains { $0.archive == second.archiveID })
            // Nothing changes in the vault: with the second night gone, the night is no "same as"
            // (that would need the second night) but writes those pages again, the rest in the first.
            if renamed {
                #expect(rename(w.nights[1].path, w.nights[1].path + ".old.nu11vlt") == 0)
            } else {
                try FileSystem.removeFile(w.nights[1].path)
            }
            let third = try #require(try w.backUp().archive)
            #expect(third.dependsOn == [w.nights[0].report.archiveID] && third.listArchive == third.archiveID, "\(third.dependsOn)")
            #expect(third.pagesReused > 0 && third.pagesReused < third.manifestPages)
            #expect(try record.pages(of: w.directory.location).allSatisfy { $0.archive != second.archiveID })
            #expect(try w.restored(w.nights[2].path).items == w.nights[2].items)
        }
    }

    @Test("a night whose only change took a whole page away writes a root and nothing else; it restores and verifies, and the night after is the same as it")
    func pageTakenAway() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir, items: 12, pageCap: 1)   // a page an item
            let full = try #require(try w.backUp().archive)
            #expect(full.manifestPages == 12)
            try w.removeOne()
            let night = try #require(try w.backUp().archive)
            #expect(night.newItems == 0 && night.manifestPages == 11 && night.pagesReused == 11, "\(night.pagesReused) of \(night.manifestPages)")
            #expect(night.dependsOn == [full.archiveID] && night.listArchive == night.archiveID)
            // The night's archive holds its header, keys and root: no pack, no page.
            let entries = try ArchiveReader(path: w.nights[1].path).entries.map(\.name)
            #expect(entries.contains(EntryName.manifestRoot))
            #expect(!entries.contains { $0.hasPrefix("Packs/") || ($0.hasPrefix("Manifest/") && $0 != EntryName.manifestRoot) }, "\(entries)")
            #expect(try w.restored(w.nights[1].path).items == w.nights[1].items)
            #expect(try ArchiveVerifier.verify(try w.open(w.nights[1].path), keyStore: nil).items == 11)
            let same = try #require(try w.backUp().archive)
            #expect(same.listArchive == night.archiveID && same.newItems == 0)
            #expect(try w.restored(w.nights[2].path).items == w.nights[1].items)
        }
    }

    @Test("an older build reads a record with pages as no record (its next night is full); page rows an older build left behind are not used, the night after records them anew, and is never a 'same as' night")
    func recordAcrossBuilds() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir, items: 40, pageAverage: 4)
            try w.backUp()
            let path = Path.join(w.home.root, ShipmentRecord.fileName)
            func mode() throws -> String {
                let database = try SQLiteDatabase(path: path, access: .readOnly)
                let rows = try database.prepare("SELECT mode FROM destinations")
                #expect(try rows.step())
                return rows.text(0)
            }
            // What an older build parses the mode with: nothing, so it has no record to build on.
            let written = try mode()
            #expect(ArchiveMode(rawValue: written) == nil, "\(written)")
            // As an older build leaves the record: its own mode text, and the page rows of a
            // manifest before its night (here still the right ones, but not known to be).
            try SQLiteDatabase(path: path, access: .readWrite).execute("UPDATE destinations SET mode = 'portable'")
            try w.add()
            let night = try #require(try w.backUp().archive)
            #expect(night.pagesReused == 0 && night.newItems == 1 && !night.dependsOn.isEmpty, "\(night.pagesReused) pages pointed at")
            #expect(try w.restored(w.nights[1].path).items == w.nights[1].items)
            #expect(ArchiveMode(rawValue: try mode()) == nil, "recorded with its pages again")
            try w.add()
            let next = try #require(try w.backUp().archive)
            #expect(next.pagesReused > 0)
            // Nothing changed since an older build's night: its record cannot say whether a name
            // or time changed, so the night writes its own page list (no "same as"), and the
            // night after, with the pages recorded again, is the same as that one.
            try SQLiteDatabase(path: path, access: .readWrite).execute("UPDATE destinations SET mode = 'portable'")
            let unknown = try #require(try w.backUp().archive)
            #expect(unknown.listArchive == unknown.archiveID && unknown.newItems == 0 && unknown.pagesReused == 0)
            #expect(try w.restored(w.nights[3].path).items == w.nights[3].items)
            let same = try #require(try w.backUp().archive)
            #expect(same.listArchive == unknown.archiveID)
        }
    }

    @Test("a night cut short before its root: a salvage reads its pages, takes the items they place in the archive it depends on from there, and every item comes back")
    func nightCutBeforeItsRoot() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir)
            try w.backUp()
            for _ in 0..<3 { try w.add() }
            try w.backUp()
            let night = w.nights[1]
            let bytes = try readBytes(night.path)
            let root = try #require(try RawZip.parse(bytes).entry(named: EntryName.manifestRoot))
            // The cut copy lies beside the first night, where its dependency is looked for.
            let cut = w.backups + "/cut.nu11vlt"
            try writeBytes(Array(bytes.prefix(root.localHeaderOffset + 40)), to: cut)
            #expect(throws: ArchiveError.self) { _ = try w.open(cut) }
            #expect(try ArchiveReader(path: cut, salvaging: true).manifestRootMissing)
            let salvaged = try w.restored(cut, salvage: true)
            #expect(salvaged.report.damaged.isEmpty)
            #expect(salvaged.items == night.items)
        }
    }

    @Test("what is found by ID, not by name: another archive under a dependency's name is not it, and a record pointing an item at other bytes is caught by the digest")
    func hostile() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir)
            try w.backUp()
            try w.add()
            try w.backUp()
            // Another home's archive put in the place (and name) of the first night.
            let other = try World(dir: dir + "/other")
            try other.backUp()
            try FileSystem.removeFile(w.nights[0].path)
            try writeBytes(try readBytes(other.nights[0].path), to: w.nights[0].path)
            expectArchiveError("dependencyMissing", kind: .missingInput) { _ = try w.open(w.nights[1].path) }
        }
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir)
            try w.backUp()
            // The record says item A is where item B's bytes are: the archive made from it
            // lists A there, and reading A finds B's bytes.
            let record = try ShipmentRecord.open(in: w.home)
            let state = try #require(try record.destination(w.directory.location))
            let rows = try record.items(of: w.directory.location)
            var items: [(id: String, item: ShipmentRecord.Item)] = []
            while let row = try rows.next() { items.append(row) }
            #expect(items.count == state.itemCount && items.map(\.id) == items.map(\.id).sorted(), "the record's items, in ID order")
            let (a, b) = (items[0], items[1])
            items[0] = (a.id, .init(archive: b.item.archive, sha256: a.item.sha256, size: a.item.size, pack: b.item.pack, offset: b.item.offset))
            let pages = try record.pages(of: w.directory.location)
            #expect(pages.count == 1, "40 items: one page")
            try record.stage(night: "edited", count: items.count, page: pages[0]) { items[$0] }
            try record.replace(w.directory.location, with: state, stagedNight: "edited", items: items.count, pages: 1)
            try w.add()
            try w.backUp()
            let archive = try w.open(w.nights[1].path)
            #expect(throws: ArchiveError.self) { _ = try ArchiveVerifier.verify(archive, keyStore: nil) }
        }
    }

    @Test("a dependency list edited in the header, or one of 257 archives, is refused before anything is read")
    func editedDependencies() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir)
            try w.backUp()
            try w.add()
            try w.backUp()
            let path = w.nights[1].path
            let dependency = try #require(try ArchiveReader(path: path).header.dependsOn.first).hex
            // Another archive ID in the list (same length: the ZIP stays whole).
            let edited = dir + "/edited.nu11vlt"
            try writeBytes(try readBytes(path), to: edited)
            try editStoredEntry(in: edited, named: EntryName.header) { header in
                let text = String(decoding: header, as: UTF8.self)
                header = Array(text.replacingOccurrences(of: dependency, with: String(dependency.reversed())).utf8)
            }
            #expect(throws: ArchiveError.self) { _ = try w.open(edited) }
            // 257 dependencies: the header is refused as it is parsed.
            let text = String(decoding: try #require(try RawZip.entries(of: readBytes(path)).first).data, as: UTF8.self)
            let many = (0..<257).map { String(format: "%032x", $0) }.map { "\"\($0)\"" }.joined(separator: ",")
            let absurd = text.replacingOccurrences(of: "\"dependsOn\":[\"\(dependency)\"]", with: "\"dependsOn\":[\(many)]")
            #expect(absurd != text)
            #expect(throws: FormatError.self) { _ = try ArchiveHeader(parsing: Array(absurd.utf8)) }
        }
    }

    @Test("a cycle: the first night's header rewritten (with a valid MAC and signature) to depend on the second, which depends on it: both refused")
    func cycle() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir)
            try w.backUp()
            try w.add()
            try w.backUp()
            let first = w.nights[0].path, second = w.nights[1].path
            let secondID = try ArchiveReader(path: second).header.archiveID
            // The first archive, opened with its own key, gets a header naming the second.
            let opened = try w.open(first)
            let old = opened.header
            let header = try ArchiveHeader(mode: old.mode, archiveID: old.archiveID, created: old.created, slots: old.slots, version: 3,
                                           dependsOn: [secondID], signer: old.signer)
            var entries = try RawZip.entries(of: readBytes(first))
            entries[0] = .stored(EntryName.header, header.bytes)
            entries[1] = .stored(EntryName.headerMAC, try ArchiveKeys.headerMAC(contentKey: opened.contentKey, header: header))
            entries[2] = .stored(EntryName.headerSignature, try #require(w.store.signingKey).sign(ArchiveReader.signatureContext + header.bytes))
            try writeBytes(RawZip.build(entries), to: first)
            #expect(try ArchiveReader(path: first).header.dependsOn == [secondID])
            expectArchiveError("damaged", kind: .damaged) { _ = try w.open(second) }
            #expect(throws: ArchiveError.self) { _ = try w.open(first) }
        }
    }

    @Test("a full night when the record is gone, a dependency was deleted, or the oldest dependency is older than --full-every; --skip-if-unchanged writes nothing")
    func fullWhenItMustBe() throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir)
            #expect(try w.backUp().fullBecause?.contains("no record") == true)
            try w.add()
            let second = try w.backUp()
            #expect(second.fullBecause == nil && second.archive?.dependsOn.count == 1)
            #expect(try w.backUp(skipIfUnchanged: true).archive == nil, "an unchanged night with --skip-if-unchanged")
            try w.add()
            try FileSystem.removeFile(w.nights[0].path)
            let afterDelete = try w.backUp()
            #expect(afterDelete.fullBecause?.contains("no longer there") == true && afterDelete.archive?.dependsOn == [])
            try w.add()
            #expect(try w.backUp(fullEvery: 86_400 / 2).fullBecause?.contains("--full-every") == true)
            try FileSystem.removeFile(Path.join(w.home.root, ShipmentRecord.fileName))
            try w.add()
            #expect(try w.backUp().fullBecause?.contains("no record") == true)
            // Another password: a full night (one restore, one password), then a chain of it.
            try w.add()
            #expect(try w.backUp(password: "another password entirely").fullBecause?.contains("password") == true)
            try w.add()
            #expect(try w.backUp(password: "another password entirely").fullBecause == nil)
            // A record that does not read: set aside, said, and the night is full.
            try writeBytes(Array("not a database at all".utf8) + randomBytes(5000), to: Path.join(w.home.root, ShipmentRecord.fileName))
            try w.add()
            let damaged = try w.backUp(password: "another password entirely")
            #expect(damaged.recordProblem?.contains("set aside") == true && damaged.fullBecause != nil, "\(String(describing: damaged.recordProblem))")
            // Every night from the full one after the deletion restores to its own vault (the
            // last ones with their own password).
            for night in w.nights.dropFirst(2).dropLast(3) { #expect(try w.restored(night.path).items == night.items) }
        }
    }

    @Test("the planner ships again an item whose content changed under the same ID, and lists only the vault's items")
    func plannerDecisions() throws {
        let archiveA = String(repeating: "a", count: 32), archiveB = String(repeating: "b", count: 32)
        let now = Date()
        func item(_ id: String, _ sha: String, name: String = "x") throws -> ItemMetadata {
            ItemMetadata(id: id, kind: .note, compartment: .vault, name: name, created: now, expires: nil, size: 5, contentTag: "", sha256: sha)
        }
        let ids = (0..<3).map { _ in UUID().uuidString }.sorted()
        let sha = { (c: Character) in String(repeating: c, count: 64) }
        var record = ShipmentRecord.Destination(
            mode: .portable, access: "password", vaultKeys: "", lastArchive: archiveB, listArchive: archiveB, listRootSHA256: sha("c"),
            archives: [archiveA: .init(id: archiveA, name: "a.nu11vlt", size: 10, created: now), archiveB: .init(id: archiveB, name: "b.nu11vlt", size: 20, created: now)],
            itemCount: 3)
        let rows: [(id: String, item: ShipmentRecord.Item)] = [
            (ids[0], .init(archive: archiveA, sha256: sha("1"), size: 5, pack: 0, offset: 0)),
            (ids[1], .init(archive: archiveB, sha256: sha("2"), size: 5, pack: 0, offset: 0)),
            (ids[2], .init(archive: archiveB, sha256: sha("3"), size: 5, pack: 0, offset: 5))]
        let objects = [StoredObject(name: "a.nu11vlt", size: 10), StoredObject(name: "b.nu11vlt", size: 20)]
        func decide(_ items: [ItemMetadata], access: String = "password", pages: [ShipmentRecord.Page] = []) throws -> IncrementalBase.Decision {
            // One item in 2^62 ends a page: the three items are one page.
            try IncrementalBase.decide(record: record, shipped: { from, through in
                ShippedRows(rows.filter { row in row.id >= from && (through.map { row.id <= $0 } ?? true) })
            }, pages: pages, objects: objects, items: { body in try items.forEach(body) },
            mode: .portable, access: access, vaultKeys: "", now: now, fullEvery: 86_400,
            pageAverage: 1 << 62, pageCap: PackedLayout.pageItemsCap)
        }
        // ids[1] has new content under the same ID; ids[2] was removed.
        let changed = [try item(ids[0], sha("1")), try item(ids[1], sha("9"))]
        guard case .incremental(let base) = try decide(changed) else { Issue.record("not incremental"); return }
        let reusedNow = try base.reused.forPage(changed)
        #expect(Set(reusedNow.keys) == [ids[0]] && base.sameAs == nil)
        #expect(base.dependsOn == [[UInt8](hex: archiveA, length: 16)!], "only the archive still needed")
        // Everything as recorded, by a build that kept no pages: it cannot tell a renamed item,
        // so the night writes its page list.
        guard case .incremental(let unknown) = try decide(try ids.enumerated().map { try item($1, sha(Character("\($0 + 1)"))) }) else {
            Issue.record("not incremental"); return
        }
        #expect(unknown.sameAs == nil && unknown.dependsOn.count == 2 && unknown.pages.byFirstID.isEmpty)
        // One more item than recorded, the others as recorded: not the same manifest.
        let extra = (try ids.enumerated().map { try item($1, sha(Character("\($0 + 1)"))) } + [try item("FFFFFFFF-0000-0000-0000-000000000000", sha("4"))])
        guard case .incremental(let grown) = try decide(extra) else { Issue.record("not incremental"); return }
        let reusedGrown = try grown.reused.forPage(extra)
        #expect(grown.sameAs == nil && Set(reusedGrown.keys) == Set(ids))
        // Other recipients: full.
        guard case .full = try decide([], access: "recipient") else { Issue.record("not full"); return }
        // With the record's page (archive B's page 0, the three items as recorded): the same
        // items and records are a "same as" night, which needs the list's archive too; the
        // same contents under another name are not, and that page is written again.
        record.pagesRecorded = true
        let asRecorded = try ids.enumerated().map { try item($1, sha(Character("\($0 + 1)"))) }
        let fingerprint = try PageFingerprint()
        for (item, row) in zip(asRecorded, rows) {
            fingerprint.add(item, pack: UInt32(row.item.pack), offset: row.item.offset, heldBy: row.item.archive)
        }
        let page = ShipmentRecord.Page(firstID: ids[0], archive: archiveB, page: 0, itemCount: 3, length: 300, sha256: sha("d"),
                                       fingerprint: try fingerprint.finish())
        guard case .incremental(let same) = try decide(asRecorded, pages: [page]) else { Issue.record("not incremental"); return }
        #expect(same.sameAs?.holder == 2 && same.dependsOn.count == 2 && same.pages.byFirstID[ids[0]]?.recorded == page)
        let renamed = try ids.enumerated().map { try item($1, sha(Character("\($0 + 1)")), name: $0 == 1 ? "y" : "x") }
        guard case .incremental(let rename) = try decide(renamed, pages: [page]) else { Issue.record("not incremental"); return }
        #expect(rename.sameAs == nil && rename.pages.byFirstID.isEmpty, "a renamed item is a change")
        // A row that could not describe a page is never pointed at.
        let broken = ShipmentRecord.Page(firstID: ids[0], archive: archiveB, page: -1, itemCount: 3, length: 300, sha256: sha("d"),
                                         fingerprint: page.fingerprint)
        guard case .incremental(let unusable) = try decide(asRecorded, pages: [broken]) else { Issue.record("not incremental"); return }
        #expect(unusable.sameAs == nil && unusable.pages.byFirstID.isEmpty)
    }

    @Test("past 256 dependencies: pages held by archives that hold no item the night needs are written again, a 'same as' root gives way to a page list; only the items' archives make a night full")
    func dependencyBoundCountsPages() throws {
        let now = Date()
        let sha = { (c: Character) in String(repeating: c, count: 64) }
        let archive = { (n: Int) in String(format: "%032x", n + 1) }
        /// `count` items, item n held by archive n, in pages of 128; `pageHolders[p]` holds page p
        /// (as recorded); the list is archive `listArchive`'s. The night changes the last
        /// `itemsChanged` items' contents.
        func decide(count: Int, pageHolders: [Int], listArchive: Int, itemsChanged: Int) throws -> IncrementalBase.Decision {
            let ids = (0..<count).map { String(format: "%08X-0000-4000-8000-000000000000", $0) }
            var archives: [String: ShipmentRecord.Archive] = [:]
            for n in Set(0..<count).union(pageHolders).union([listArchive]) {
                archives[archive(n)] = .init(id: archive(n), name: "\(n).nu11vlt", size: 10, created: now)
            }
            var record = ShipmentRecord.Destination(mode: .portable, access: "password", vaultKeys: "", lastArchive: archive(listArchive),
                                                    listArchive: archive(listArchive), listRootSHA256: sha("c"), archives: archives,
                                                    itemCount: count)
            record.pagesRecorded = true
            let rows: [(id: String, item: ShipmentRecord.Item)] = ids.enumerated().map {
                ($1, .init(archive: archive($0), sha256: sha("1"), size: 5, pack: 0, offset: 0))
            }
            let items = ids.enumerated().map { n, id in
                ItemMetadata(id: id, kind: .note, compartment: .vault, name: "x", created: now, expires: nil, size: 5, contentTag: "",
                             sha256: n >= count - itemsChanged ? sha("2") : sha("1"))
            }
            let pages = try pageHolders.enumerated().map { p, holder in
                let fingerprint = try PageFingerprint()
                let range = (p * 128)..<min(count, p * 128 + 128)
                for n in range {
                    let item = ItemMetadata(id: ids[n], kind: .note, compartment: .vault, name: "x", created: now, expires: nil, size: 5,
                                            contentTag: "", sha256: sha("1"))
                    fingerprint.add(item, pack: 0, offset: 0, heldBy: archive(n))
                }
                return ShipmentRecord.Page(firstID: ids[range.lowerBound], archive: archive(holder), page: Int64(p), itemCount: Int64(range.count),
                                           length: 300, sha256: sha("d"), fingerprint: try fingerprint.finish())
            }
            return try IncrementalBase.decide(record: record, shipped: { from, through in
                ShippedRows(rows.filter { row in row.id >= from && (through.map { row.id <= $0 } ?? true) })
            }, pages: pages, objects: archives.values.map { StoredObject(name: $0.name, size: $0.size) },
            items: { body in try items.forEach(body) }, mode: .portable, access: "password", vaultKeys: "", now: now,
            fullEvery: 86_400, pageAverage: 1 << 62, pageCap: 128)
        }
        let bound = ManifestV3.dependencies, pageOnly = 1000
        // 257 items; the first page held by an archive that holds no item. With the last item
        // changed, 256 item holders and the page's: the page is written again.
        guard case .incremental(let base) = try decide(count: bound + 1, pageHolders: [pageOnly, 0, 0], listArchive: 0, itemsChanged: 1)
        else { Issue.record("not incremental"); return }
        #expect(base.dependsOn.count == bound && base.pages.byFirstID.count == 1 && base.sameAs == nil, "\(base.pages.byFirstID.count)")
        #expect(!base.dependsOn.contains([UInt8](hex: archive(pageOnly), length: 16)!))
        // Two items changed (the second page is written too): 255 item holders and the first
        // page's, within the bound: that page is pointed at.
        guard case .incremental(let within) = try decide(count: bound + 1, pageHolders: [pageOnly, 0, 0], listArchive: 0, itemsChanged: 2)
        else { Issue.record("not incremental"); return }
        #expect(within.dependsOn.count == bound && within.pages.byFirstID.count == 1)
        #expect(within.dependsOn.contains([UInt8](hex: archive(pageOnly), length: 16)!))
        // 256 items, nothing changed, the list in an archive that holds nothing else (its night
        // took a page away): a "same as" root would need 257; a page list pointing at both
        // pages needs 256.
        guard case .incremental(let unchanged) = try decide(count: bound, pageHolders: [0, 0], listArchive: pageOnly, itemsChanged: 0)
        else { Issue.record("not incremental"); return }
        #expect(unchanged.sameAs == nil && unchanged.dependsOn.count == bound && unchanged.pages.byFirstID.count == 2)
        // The same with the list in an item's archive: a "same as" night.
        guard case .incremental(let same) = try decide(count: bound, pageHolders: [0, 0], listArchive: 0, itemsChanged: 0)
        else { Issue.record("not incremental"); return }
        #expect(same.sameAs != nil && same.dependsOn.count == bound)
        // 257 item holders: full, as before.
        guard case .full(let why) = try decide(count: bound + 1, pageHolders: [0, 0, 0], listArchive: 0, itemsChanged: 0)
        else { Issue.record("not full"); return }
        #expect(why.contains("more than 256"), "\(why)")
    }

    /// Rows of a record, as a walk.
    final class ShippedRows: ShippedItems {
        var rows: ArraySlice<(id: String, item: ShipmentRecord.Item)>
        init(_ rows: [(id: String, item: ShipmentRecord.Item)]) { self.rows = rows[...] }
        func next() throws -> (id: String, item: ShipmentRecord.Item)? { rows.popFirst() }
    }

    /// A local directory whose deletions stop (as a kill would) after `deletesLeft`.
    final class DyingStore: ArchiveStore {
        let inner: LocalDirectoryStore
        var deletesLeft: Int
        init(_ inner: LocalDirectoryStore, deletesLeft: Int) { self.inner = inner; self.deletesLeft = deletesLeft }
        var location: String { inner.location }
        func location(of name: String) -> String { inner.location(of: name) }
        func list() throws(ArchiveError) -> [StoredObject] { try inner.list() }
        func keyEntries(of object: StoredObject) throws(ArchiveError) -> ArchiveKeyEntries? { try inner.keyEntries(of: object) }
        func fetch(_ object: StoredObject, progress: ArchiveProgress?) throws(ArchiveError) -> FetchedArchive { try inner.fetch(object, progress: progress) }
        func delete(_ object: StoredObject) throws(ArchiveError) {
            guard deletesLeft > 0 else { throw .remote(location: location(of: object.name), why: "killed", kind: .ioFailure, hint: nil) }
            deletesLeft -= 1
            try inner.delete(object)
        }
        func finishDeleting() throws(ArchiveError) { try inner.finishDeleting() }
        func lock(exclusive: Bool, waitSeconds: Double) throws(ArchiveError) -> any ArchiveStoreLock { try inner.lock(exclusive: exclusive, waitSeconds: waitSeconds) }
        func removeLeftovers(dryRun: Bool) -> Int { inner.removeLeftovers(dryRun: dryRun) }
        func recorded(_ object: StoredObject, in records: [WrittenArchives.Record]) -> WrittenArchives.Record? { inner.recorded(object, in: records) }
        func publishNew(name: String?, at date: Date, _ options: PublishOptions, make: (NewArchiveFile) throws -> ArchiveCreator.Report) throws -> Publication {
            try inner.publishNew(name: name, at: date, options, make: make)
        }
        func check(_ object: StoredObject, against record: WrittenArchives.Record, home: N11Home) throws(ArchiveError) -> RecordMatch {
            try inner.check(object, against: record, home: home)
        }
    }

    @Test("prune --keep-daily 7 over 30 nights keeps what the kept nights need ('needed by'; with small pages, archives that hold only pages too), and stopped after any deletion every kept night still restores",
          arguments: [PackedLayout.averagePageItems, 4])
    func pruneKeepsDependencies(pageAverage: UInt64) throws {
        try withTemporaryDirectory { dir in
            let w = try World(dir: dir, items: 20, pageAverage: pageAverage)
            for night in 1...30 {
                if night > 1 && night % 5 != 0 { try w.add() }
                if night % 4 == 0 { try w.removeOne() }
                try w.backUp()
            }
            let secrets = w.sources()
            func prune(_ store: any ArchiveStore, dryRun: Bool = false) throws -> ArchivePruner.Report {
                try ArchivePruner.prune(store, .init(policy: .init(keepDaily: 7), dryRun: dryRun, home: w.home, secrets: secrets,
                                                     kdfCeiling: .standard))
            }
            let plan = try prune(w.directory, dryRun: true)
            let needed = plan.decision.keep.filter { $0.reasons.contains { $0.hasPrefix("needed by") } }
            #expect(!needed.isEmpty, "the kept nights need older ones")
            #expect(plan.decision.keep.count - needed.count == 7)
            // Each kept night's dependencies are all kept.
            let keptIDs = Set(try plan.decision.keep.map { try ArchiveReader(path: $0.archive.path).header.archiveIDHex })
            for kept in plan.decision.keep {
                let header = try ArchiveReader(path: kept.archive.path).header
                #expect(Set(header.dependsOn.map(\.hex)).isSubset(of: keptIDs), "\(kept.archive.path) loses a dependency")
            }
            // Stopped after each number of deletions: every kept night restores.
            for stopAfter in [0, 1, plan.deleted.count / 2] {
                let store = DyingStore(w.directory, deletesLeft: stopAfter)
                let before = listing(of: w.backups).filter { $0.hasSuffix(".nu11vlt") }.count
                _ = try? prune(store)
                #expect(listing(of: w.backups).filter { $0.hasSuffix(".nu11vlt") }.count == before - stopAfter, "\(stopAfter) deletion(s) before the stop")
                for kept in plan.decision.keep {
                    let night = try #require(w.nights.first { $0.path == kept.archive.path })
                    #expect(try w.restored(night.path).items == night.items, "after \(stopAfter) deletion(s): \(night.path)")
                }
            }
            let done = try prune(w.directory)
            #expect(Set(done.deleted).isDisjoint(with: plan.decision.keep.map(\.archive.path)))
            #expect(plan.decision.keep.allSatisfy { exists($0.archive.path) })
        }
    }
}

/// The committed incremental fixtures (Fixtures/vectors/incremental, made by
/// Scripts/make-incremental-fixtures): each case directory's `case.txt` names archives to
/// read there and what must come of it; Scripts/format-reference.py
/// --incremental-testkit reads the same files from FORMAT.md alone.
@Suite("Incremental fixtures: what both readers make of chains, renamed, missing and impostor dependencies")
struct IncrementalTestkitTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Fixtures/vectors/incremental").standardized.path
    static let password = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Fixtures/golden/portable-v1.password").standardized.path

    static func cases() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    @Test func theFolderHoldsBothOutcomes() throws {
        var outcomes = Set<String>()
        for name in Self.cases() {
            let text = try String(contentsOfFile: Self.directory + "/" + name + "/case.txt", encoding: .utf8)
            for line in text.split(separator: "\n") { outcomes.insert(String(line.split(separator: ":", maxSplits: 1)[1]).trimmingCharacters(in: .whitespaces)) }
        }
        #expect(outcomes == ["success", "missing dependency"])
    }

    @Test(arguments: cases())
    func caseHasItsStatedOutcomes(_ name: String) throws {
        let folder = Self.directory + "/" + name
        var password = try readBytes(Self.password)
        if password.last == 0x0A { password.removeLast() }
        let text = try String(contentsOfFile: folder + "/case.txt", encoding: .utf8)
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            let (archive, expected) = (parts[0], parts[1])
            let sources = UnlockSources(password: { _ in try SecureBytes(copying: password) }, keyStore: { throw NoKeyStore() },
                                        keyStoreExists: { false }, identityFiles: { [] })
            sources.dependencies = StoreDependencies(try LocalDirectoryStore(folder, forPrune: false))
            let outcome: String
            do {
                let unlocked = try ArchiveReader(path: folder + "/" + archive).unlock(with: sources, kdfCeiling: .standard)
                _ = try ArchiveVerifier.verify(unlocked, keyStore: nil)
                outcome = "success"
            } catch ArchiveError.dependencyMissing {
                outcome = "missing dependency"
            } catch {
                outcome = "failure: \(error)"
            }
            #expect(outcome == expected, "\(name)/\(archive)")
        }
    }
}
