import Foundation
import N11Container
import N11Crypto
import N11Format
import N11System
import N11Vault

/// Builds a `.nu11vlt` archive from a vault (FORMAT.md). The output path holds a complete
/// archive or nothing: the ZIP is written to a temp file in the same directory, fsynced,
/// and only then renamed into place.
public enum ArchiveCreator {
    public struct Request {
        public let mode: ArchiveMode
        public let compartments: Set<Compartment>
        public let output: String
        public let replaceExisting: Bool
        public let kdf: Argon2Parameters
        public let now: Date
        /// 2, or 3 for DESIGN.md §8's packed layout (the default).
        public let formatVersion: Int
        /// Version 3: a pack is closed at this much payload (smaller in tests, to make many).
        var packTarget = PackedLayout.packTarget
        /// Version 3: one item in this many ends a page, on average (smaller in tests, to make many).
        var pageAverage = PackedLayout.averagePageItems
        /// Version 3: a page is cut at this many items (smaller in tests).
        var pageCap = PackedLayout.pageItemsCap
        /// Version 3: a pack's items are read in segments of about this much (smaller in tests, to make many).
        var segmentTarget = PackedLayout.segmentTarget
        /// Version 3: signs the header (`header.sig`, DESIGN.md §8.4); `ArchiveBackup` gives
        /// the home's signing key. Ignored by version 2, which has no signatures.
        public var signingKey: Ed25519SigningKey?
        /// Version 3: an incremental archive's base (DESIGN.md §8.3): the archives it depends
        /// on and where its reused items are, or the manifest it is the same as.
        public var incremental: IncrementalBase?
        /// Version 3: the record of what was shipped, into which every item and where its
        /// bytes are is staged (`ShipmentRecord.stage`, under the archive's ID) a page at a
        /// time as the archive is written; nil: none kept.
        var shipmentRecord: ShipmentRecord?
        /// Made when libzip starts writing, from the file's descriptor: told how far the file is
        /// final as it is written (a remote store streams it up: `StreamedUpload`).
        var follower: ((FileDescriptor) -> any FinalPrefixObserver)?

        public init(mode: ArchiveMode, compartments: Set<Compartment>, output: String, replaceExisting: Bool,
                    kdf: Argon2Parameters = .moderate, now: Date = Date(), formatVersion: Int = ArchiveHeader.currentVersion) {
            self.mode = mode; self.compartments = compartments; self.output = output
            self.replaceExisting = replaceExisting; self.kdf = kdf; self.now = now; self.formatVersion = formatVersion
        }
    }

    public struct Report: Sendable {
        public let path: String
        public let archiveID: String
        public let mode: ArchiveMode
        public let items: Int
        public let plaintextBytes: Int64
        public let skippedExpired: [String]
        public let archiveBytes: Int64
        /// SHA-256 of the whole archive file as written (hex), for `WrittenArchives`.
        public let sha256: String
        /// The key that signed its header; nil for an unsigned archive.
        public let signer: Ed25519PublicKey?
        /// Version 3: which archive's root holds its page list, with that root's SHA-256 (its
        /// own, or the one its "same as" root names). Where each item's bytes are was staged
        /// in `Request.shipmentRecord`, unless the root is "same as".
        public let listArchive: String
        public let listRootSHA256: String
        public let dependsOn: [String]
        /// Its password slots' Argon2id, and the first one's wrap (what the next incremental
        /// night reuses, and checks its password against).
        public let passwordKDFs: [ArchiveHeader.KDF]
        public let firstPasswordWrap: [UInt8]?
        /// Items and plaintext bytes written into this archive (the rest are its dependencies').
        public let newItems: Int
        public let newBytes: Int64
        /// Version 3: the pages its root lists, and of them those earlier archives hold (an
        /// incremental night points at the pages that did not change).
        public var manifestPages = 0
        public var pagesReused = 0
        /// Why where its items are could not be staged in `Request.shipmentRecord` (the
        /// archive is whole; the night is not recorded).
        public var stagingProblem: String? = nil
        /// Version 3: live items of the compartments it leaves out, counted by its first pass
        /// (nil: not counted).
        public var leftOut: [Compartment: Int]? = nil
    }

    /// A portable archive that opens with one password (`request.kdf` sets its cost).
    public static func create(from vault: Vault, _ request: Request, progress: ArchiveProgress? = nil,
                              password: () throws -> SecureBytes) throws(ArchiveError) -> Report {
        try create(from: vault, request, progress: progress) {
            ArchiveAccess(passwords: [try password()], kdf: request.kdf)
        }
    }

    /// `access` (the passwords and recipients that will open it) is asked for only in
    /// portable mode, after all cheap checks passed. `progress` counts each item's plaintext
    /// as libzip pulls it through.
    public static func create(from vault: Vault, _ request: Request, progress: ArchiveProgress? = nil,
                              access: () throws -> ArchiveAccess) throws(ArchiveError) -> Report {
        let output = Path.absolute(request.output)
        do {
            try checkOutput(output, replaceExisting: request.replaceExisting)
            // Keys first (FORMAT.md §3–4): Argon2id's memory is the peak of the whole run, so
            // derive it before the catalogue and the ZIP writer hold anything.
            let keys = try NewArchiveKeys(mode: request.mode, created: request.now, version: request.formatVersion,
                                          signer: request.formatVersion == 3 ? request.signingKey?.publicKey : nil,
                                          dependsOn: request.incremental?.dependsOn ?? [], access: access)
            if request.formatVersion == 3 {
                return try createPacked(from: vault, request, keys: keys, output: output, progress: progress)
            }
            let plan = try Plan(vault: vault, request: request, keys: keys)
            let (archiveBytes, sha256) = try write(plan, keys: keys, vault: vault, to: output, request: request, progress: progress)
            progress?.finish()
            return Report(path: output, archiveID: keys.header.archiveIDHex, mode: request.mode, items: plan.items.count,
                          plaintextBytes: plan.plaintextBytes, skippedExpired: plan.skippedExpired, archiveBytes: archiveBytes,
                          sha256: sha256, signer: nil, listArchive: keys.header.archiveIDHex, listRootSHA256: "",
                          dependsOn: [], passwordKDFs: keys.header.passwordKDFs, firstPasswordWrap: firstPasswordWrap(keys.header),
                          newItems: plan.items.count, newBytes: plan.plaintextBytes)
        } catch { throw ArchiveError.creating(output, error) }
    }

    /// The cheap checks, before any password is asked for: nothing in the way (unless it may
    /// be replaced) and a directory to write into, swept of dead writers' temp files.
    private static func checkOutput(_ output: String, replaceExisting: Bool) throws {
        if !replaceExisting, try FileStatus.of(output) != nil { throw ArchiveError.outputExists(path: output) }
        let outputDirectory = Path.directory(of: output)
        guard try FileStatus.of(outputDirectory, followLinks: true)?.kind == .directory else {
            throw SystemError("no such directory", path: outputDirectory, errno: ENOENT)
        }
        AtomicFile.removeLeftovers(in: outputDirectory)
    }

    /// Version 2: what goes into the archive: the live items of the chosen compartments, the
    /// manifest that lists them (sealed), and what was left out.
    struct Plan {
        let items: [ItemMetadata]
        let entries: [Manifest.Item]
        /// The sealed `manifest.json`.
        let sealedManifest: [UInt8]
        let vaultKeys: [Compartment: [UInt8]]
        let skippedExpired: [String]
        var plaintextBytes: Int64 { items.reduce(0) { $0 + $1.size } }

        init(vault: Vault, request: Request, keys: NewArchiveKeys) throws {
            // A damaged record would silently be missing from the archive: refuse instead.
            if let damaged = try vault.damagedItemErrors().first { throw damaged }
            let all = try vault.items(includeExpired: true, now: request.now).filter { request.compartments.contains($0.compartment) }
            items = all.filter { !$0.isExpired(at: request.now) }
            skippedExpired = all.filter { $0.isExpired(at: request.now) }.map(\.id)
            entries = items.map { item in
                Manifest.Item(id: item.id, kind: item.kind, compartment: item.compartment, name: item.name,
                              created: item.created, expires: item.expires, size: item.size, sha256: item.sha256,
                              mode: request.mode)
            }
            // Never write what a reader would refuse (FORMAT.md §8).
            guard entries.count <= FormatLimits.items else {
                throw ArchiveError.tooLarge("\(entries.count) items (at most \(FormatLimits.items))")
            }
            // Secure: the compartment keys the items are sealed under, so that the archive finds
            // them after a key rotation. A vault opened for writing has finished any rotation,
            // so every item is under its compartment's current key.
            var vaultKeys: [Compartment: [UInt8]]? = nil
            if request.mode == .secure {
                var ids: [Compartment: [UInt8]] = [:]
                for compartment in request.compartments { ids[compartment] = try vault.keyStore.currentKeyID(for: compartment) }
                for item in items { precondition(item.keyID.isEmpty || item.keyID == ids[item.compartment], "an item under a retired key") }
                vaultKeys = ids
            }
            self.vaultKeys = vaultKeys ?? [:]
            let manifestBytes = Manifest(header: keys.header, items: entries, vaultKeys: vaultKeys).serialized()
            guard Int64(manifestBytes.count) <= FormatLimits.manifestBytes else {
                throw ArchiveError.tooLarge("a manifest of \(manifestBytes.count) bytes (at most \(FormatLimits.manifestBytes))")
            }
            sealedManifest = try ChunkedStream.seal(manifestBytes, key: keys.entryKey(EntryName.manifest))
        }
    }

    /// Writes the ZIP into a temp file beside `output` and publishes it (`AtomicFile`: owner
    /// only, fsynced, renamed into place, directory fsynced). Returns the archive's size and
    /// SHA-256, read back from the file before it is published.
    private static func write(_ plan: Plan, keys: NewArchiveKeys, vault: Vault, to output: String, request: Request,
                              progress: ArchiveProgress?) throws -> (Int64, String) {
        // The temp name carries our PID, so a concurrent create's sweep leaves it alone.
        let file = try AtomicFile(path: output, mode: 0o600)
        let writer = try ZipWriter(writingTo: file.descriptor, named: output)
        let mtime = Int64(request.now.timeIntervalSince1970)
        let header = keys.header.bytes
        try writer.addEntry(name: EntryName.header, size: Int64(header.count), modified: mtime) { MemorySource(header) }
        try writer.addEntry(name: EntryName.headerMAC, size: Int64(keys.headerMAC.count), modified: mtime) { MemorySource(keys.headerMAC) }
        try writer.addEntry(name: EntryName.manifest, size: Int64(plan.sealedManifest.count), modified: mtime) {
            MemorySource(plan.sealedManifest)
        }
        progress?.begin(items: plan.items.count, bytes: plan.plaintextBytes)
        // Vault items are read, checked and re-encrypted on worker threads (as many as
        // there are cores, up to 4; items take turns) while libzip checksums and writes on
        // this one: re-encrypting is the slower half, and items are independent. From
        // `start()` on only the workers touch the vault, and only to read. Each worker
        // derives its entries' keys into its own reused locked buffer: the sealing source
        // copies the key into its cipher context when it is made, before the next one.
        let lanes = max(1, min(ProcessInfo.processInfo.activeProcessorCount, 4))
        let keySlots = try (0..<lanes).map { _ in try SecureBytes(count: 32) }
        let readAhead = ReadAheadLanes(count: plan.items.count, lanes: lanes) { lane in
            { index in
                try keys.entryKey(plan.entries[index].entry, into: keySlots[lane])
                return try itemSource(plan.items[index], vault: vault, mode: request.mode, entryKey: keySlots[lane])
            }
        }
        defer { readAhead.finish() }
        for (index, entry) in plan.entries.enumerated() {
            try writer.addEntry(name: entry.entry, size: entry.sealedSize, modified: mtime) {
                progress.counting(readAhead.stream(index), size: plan.items[index].size)
            }
        }
        // A secure archive must never exist without its key: store the key first.
        if let deviceKey = keys.deviceKey { try vault.keyStore.addArchiveKey(id: keys.header.archiveID, key: deviceKey) }
        try readAhead.start()
        return try finish(writer, file: file, output: output, replaceExisting: request.replaceExisting, follower: request.follower)
    }

    /// Version 3 (DESIGN.md §8.2): the header and its MAC (and signature), then each manifest
    /// page followed by the packs of its items, then the root. A first pass over the catalogue
    /// decides the layout, keeping a few numbers per page; while libzip writes, each page is
    /// made again from the catalogue (`PackedPages`), so memory does not grow with the items
    /// (issue 34). Vault items are read and checked on worker threads as in version 2; each
    /// pack seals its items' payloads back to back as one stream while libzip writes it.
    private static func createPacked(from vault: Vault, _ request: Request, keys: NewArchiveKeys, output: String,
                                     progress: ArchiveProgress?) throws -> Report {
        var selection = PackedLayout.Selection(compartments: request.compartments, now: request.now, mode: request.mode,
                                               packTarget: request.packTarget, segmentTarget: request.segmentTarget,
                                               pageAverage: request.pageAverage, pageCap: request.pageCap,
                                               reused: request.incremental?.reused)
        selection.pagesToReuse = request.incremental?.pages ?? .none
        // Pages are fingerprinted when they are recorded, or compared with recorded ones.
        if request.shipmentRecord != nil || !selection.pagesToReuse.byFirstID.isEmpty {
            selection.archiveIDs = [keys.header.archiveIDHex] + keys.header.dependsOn.map(\.hex)
        }
        // An unchanged night's walk of the catalogue was the decision's.
        let layout = try request.incremental.flatMap { base in
            try base.sameAs == nil ? nil : base.census.flatMap { try PackedLayout(unchanged: $0, vault: vault, selection) }
        } ?? PackedLayout(vault: vault, selection)
        let made = PackedPages(vault: vault, layout: layout, selection: selection)
        // Rows staged for an archive that is not written are dropped (the caller drops them
        // too if it is not published).
        do { return try writePacked(vault, request, keys: keys, layout: layout, made: made, output: output, progress: progress) }
        catch {
            request.shipmentRecord?.discard(night: keys.header.archiveIDHex)
            throw error
        }
    }

    private static func writePacked(_ vault: Vault, _ request: Request, keys: NewArchiveKeys, layout: PackedLayout, made: PackedPages,
                                    output: String, progress: ArchiveProgress?) throws -> Report {
        let id = keys.header.archiveIDHex
        let dependsOn = keys.header.dependsOn.map(\.hex)
        // An unchanged night writes no page and no pack: its root names the manifest it is the
        // same as (FORMAT.md §10.6).
        let sameAs = request.incremental?.sameAs
        let pages = sameAs == nil ? layout.pages : []
        let ownPages = pages.filter { $0.reference == nil }
        var pageDigests: [[UInt8]] = []
        var stagingProblem: String? = nil

        let file = try AtomicFile(path: output, mode: 0o600)
        let writer = try ZipWriter(writingTo: file.descriptor, named: output)
        let mtime = Int64(request.now.timeIntervalSince1970)
        func add(_ name: String, _ bytes: [UInt8]) throws {
            try writer.addEntry(name: name, size: Int64(bytes.count), modified: mtime) { MemorySource(bytes) }
        }
        try add(EntryName.header, keys.header.bytes)
        try add(EntryName.headerMAC, keys.headerMAC)
        if let signingKey = request.signingKey {
            try add(EntryName.headerSignature, try signingKey.sign(ArchiveReader.signatureContext + keys.header.bytes))
        }
        progress?.begin(items: sameAs == nil ? layout.newItems : 0, bytes: sameAs == nil ? layout.newBytes : 0)
        // A pack's items are read and checked a segment (about 1 MiB) at a time on worker
        // threads (as many as there are cores, up to 4; segments take turns) while libzip
        // checksums and writes on this one, where each pack is sealed as its segments arrive.
        // A worker is a few MiB ahead at most: with a whole 64 MiB pack per worker, the other
        // waited for the writer to finish this one, and one core did all the work (issue 29).
        // From `start()` on only the workers and `made` touch the vault. A lane opens at most
        // two segments ahead: opening one may make its page (about 2 MB of records for 4,096
        // items), and a night's small packs would otherwise open 20 ahead.
        let packs = pages.flatMap(\.packs)
        var firstSegment: [Int] = [], segmentCount = 0
        for pack in packs {
            firstSegment.append(segmentCount)
            segmentCount += pack.segments
        }
        let lanes = max(1, min(ProcessInfo.processInfo.activeProcessorCount, 4))
        // Content files are read in ID order, at random on the disk: from a cold cache (a
        // nightly run) each was a read waited for alone. A thread asks the kernel for each
        // segment's files as a lane takes it, so many reads are in flight (100,000 notes
        // from a cold cache: 8.4-9.8 s -> 4.3-6.3 s); paced, so a warm run pays almost nothing.
        let hints = HintThread(files: .own, paced: true)
        defer { hints.finish() }
        let readAhead = ReadAheadLanes(count: segmentCount, lanes: lanes, streamsAhead: 2) { _ in
            { segment in
                // The pack that holds it: the last whose first segment is not after it.
                var low = 0, high = firstSegment.count - 1
                while low < high {
                    let middle = (low + high + 1) / 2
                    if firstSegment[middle] <= segment { low = middle } else { high = middle - 1 }
                }
                let items = try made.takeSegment(pack: packs[low].number, segment: segment - firstSegment[low])
                hints.add(items.map { vault.contentPath(of: $0) })
                return ConcatenatedSource(items.map { item in
                    {
                        progress.counting(try vault.sealedItem(item).checkedPayload(asVaultFile: request.mode == .secure), size: item.size)
                    } as () throws -> ByteSource
                })
            }
        }
        defer { readAhead.finish() }
        // A record that cannot be written costs the record, not the archive: staging stops,
        // and the night is not recorded (the next one builds on the last recorded).
        func stage(_ madePage: PackedLayout.MadePage, as recordedPage: ShipmentRecord.Page) {
            guard let record = request.shipmentRecord, stagingProblem == nil else { return }
            do {
                // Indexed, not parsed: each record is read as its row is written.
                let records = try ManifestPage.indexed(madePage.plaintext, mode: request.mode, dependencies: dependsOn.count,
                                                       what: "page \(madePage.page.number)")
                try record.stage(night: id, count: records.count, page: recordedPage) { n in
                    let record = try records.record(n)
                    let holder = record.location.holder == 0 ? id : dependsOn[record.location.holder - 1]
                    return (record.idString, .init(archive: holder, sha256: record.sha256.hex, size: record.size,
                                                   pack: Int64(record.location.pack), offset: record.location.offset))
                }
            } catch {
                stagingProblem = "\(error)"
                record.discard(night: id)
            }
        }
        var packIndex = 0
        for page in pages {
            if let reference = page.reference {
                // An earlier archive's page, unchanged: the root points at it, and the record
                // keeps it as it was (its items are staged all the same).
                if request.shipmentRecord != nil { stage(try made.takePage(page.number), as: reference.recorded) }
                continue
            }
            let pageName = EntryName.page(page.entry)
            try writer.addEntry(name: pageName, size: FormatLimits.sealedLength(payloadSize: Int64(page.plaintextLength)), modified: mtime) {
                // libzip takes the entries in order on this thread: page n is sealed when it is written.
                // Pages are made on whichever thread first needs them and let go on another:
                // free pages are handed back every eight pages. With the fixed threshold of
                // `Heap.fixLargeAllocationThreshold` this keeps a long run's RSS down (alone,
                // 88 → 82 MiB at 1,000,000 notes).
                if page.entry % 8 == 7 { Heap.releaseFreePages() }
                let madePage = try made.takePage(page.number)
                let digest = try SHA256Digest.hash(madePage.plaintext)
                pageDigests.append(digest)
                stage(madePage, as: ShipmentRecord.Page(firstID: page.firstID, archive: id, page: Int64(page.entry), itemCount: Int64(page.itemCount),
                                                        length: Int64(madePage.plaintext.count), sha256: digest.hex,
                                                        fingerprint: madePage.fingerprint ?? ""))
                return MemorySource(try ChunkedStream.seal(madePage.plaintext, key: keys.entryKey(pageName)))
            }
            for pack in page.packs {
                let first = firstSegment[packIndex]
                packIndex += 1
                try writer.addEntry(name: EntryName.pack(pack.number), size: FormatLimits.sealedLength(payloadSize: pack.payloadBytes),
                                    modified: mtime) {
                    let segments = (first..<first + pack.segments).map { segment in
                        { readAhead.stream(segment) } as () throws -> ByteSource
                    }
                    return try Resealing.chunked(ConcatenatedSource(segments), key: try keys.entryKey(EntryName.pack(pack.number)))
                }
            }
        }
        func root() throws -> [UInt8] {
            try sameAs.map { ManifestRoot.sameAs(holder: $0.holder, rootSHA256: $0.rootSHA256).serialized() }
                ?? layout.root(pageDigests: pageDigests).serialized()
        }
        // Its length now (a digest is 32 bytes whatever it is); its bytes once every page is written.
        let rootLength = try root().count
        guard Int64(rootLength) <= FormatLimits.manifestBytes else {
            throw ArchiveError.tooLarge("a manifest root of \(rootLength) bytes (at most \(FormatLimits.manifestBytes))")
        }
        var rootPlaintext: [UInt8] = []
        try writer.addEntry(name: EntryName.manifestRoot, size: FormatLimits.sealedLength(payloadSize: Int64(rootLength)), modified: mtime) {
            rootPlaintext = try root()
            // libzip takes entries in order: every page is written by now, and a digest is 32
            // bytes whatever it is. Otherwise nothing is published.
            guard rootPlaintext.count == rootLength, pageDigests.count == ownPages.count else {
                throw SystemError("the manifest root came out otherwise than planned; nothing was written", path: output, errno: EIO)
            }
            return MemorySource(try ChunkedStream.seal(rootPlaintext, key: keys.entryKey(EntryName.manifestRoot)))
        }
        if let deviceKey = keys.deviceKey { try vault.keyStore.addArchiveKey(id: keys.header.archiveID, key: deviceKey) }
        try readAhead.start()
        let (archiveBytes, sha256) = try finish(writer, file: file, output: output, replaceExisting: request.replaceExisting,
                                                follower: request.follower)
        progress?.finish()
        return Report(path: output, archiveID: id, mode: request.mode, items: layout.itemCount,
                      plaintextBytes: layout.plaintextBytes, skippedExpired: layout.skippedExpired, archiveBytes: archiveBytes,
                      sha256: sha256, signer: keys.header.signer.flatMap { try? Ed25519PublicKey(bytes: $0) },
                      listArchive: sameAs.map { dependsOn[$0.holder - 1] } ?? id,
                      listRootSHA256: try sameAs.map { $0.rootSHA256.hex } ?? SHA256Digest.hash(rootPlaintext).hex,
                      dependsOn: dependsOn, passwordKDFs: keys.header.passwordKDFs, firstPasswordWrap: firstPasswordWrap(keys.header),
                      newItems: sameAs == nil ? layout.newItems : 0, newBytes: sameAs == nil ? layout.newBytes : 0,
                      manifestPages: pages.count, pagesReused: pages.count - ownPages.count,
                      stagingProblem: stagingProblem, leftOut: layout.leftOut)
    }

    /// The first password slot's wrap (what the next incremental night reuses).
    private static func firstPasswordWrap(_ header: ArchiveHeader) -> [UInt8]? {
        header.slots.lazy.compactMap { if case .password(_, let wrap) = $0 { return wrap } else { return nil } }.first
    }

    /// Lets libzip write everything out, then publishes the file: its size and SHA-256 are
    /// taken from the file before it is renamed into place. The SHA-256 is read back from the
    /// page cache while libzip writes (`TrailingSHA256`); if that could not follow the
    /// writer, the whole file is read back once it is durable. A `follower` hears the same.
    private static func finish(_ writer: ZipWriter, file: AtomicFile, output: String, replaceExisting: Bool,
                               follower: ((FileDescriptor) -> any FinalPrefixObserver)?) throws -> (Int64, String) {
        let trailing = TrailingSHA256(file.descriptor)
        defer { trailing.cancel() }
        writer.observeFinalPrefix(FinalPrefixObservers([trailing] + (follower.map { [$0(file.descriptor)] } ?? [])))
        do { try writer.finish() }
        catch let error as SystemError where error.path == output {
            throw SystemError("cannot write the archive", path: output, errno: error.errno)
        }
        let size = try file.descriptor.status().size
        // fsync waits on the disk while the thread hashes what libzip wrote last.
        try file.descriptor.sync()
        let sha256 = try trailing.finish(size: size) ?? WrittenArchives.sha256(of: file.descriptor)
        do { try file.commit(replaceExisting: replaceExisting) }
        catch let error as SystemError where error.errno == EEXIST { throw ArchiveError.outputExists(path: output) }
        return (size, sha256)
    }

    /// The sealed entry for one vault item, opened only when libzip starts writing it.
    private static func itemSource(_ item: ItemMetadata, vault: Vault, mode: ArchiveMode, entryKey: SecureBytes) throws -> ByteSource {
        let sealed = try vault.sealedItem(item)
        switch mode {
        case .portable: return try sealed.resealedInChunks(under: entryKey)
        case .secure: return try sealed.wrappedInChunks(under: entryKey)
        }
    }
}
