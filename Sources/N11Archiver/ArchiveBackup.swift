import Foundation
import N11Crypto
import N11Format
import N11System
import N11Vault

/// `create`: an archive of the vault's chosen compartments, made and published in one of
/// three places, then recorded as written by this home (`WrittenArchives`), so that `prune`
/// and `verify --as-written` know it. A failure leaves no archive under a final name.
public enum ArchiveBackup {
    public enum Destination {
        /// A file (`-o FILE`); replaced only with `replaceExisting` (`--force`).
        case file(String, replaceExisting: Bool)
        /// A store, under `name` or a free dated name (`--output-dir`, `-o REMOTE:FILE`).
        case store(any ArchiveStore, name: String?, PublishOptions)
        /// Standard output (`-o -`): made whole in `spool` first (a ZIP is written with seeks,
        /// and only a complete, checked archive may leave), then copied out and removed.
        case standardOutput(spool: String)
    }

    public struct Request {
        public let mode: ArchiveMode
        public let compartments: Set<Compartment>
        public let kdf: Argon2Parameters
        public let destination: Destination
        public let home: N11Home
        public let now: Date
        /// 2 or 3 (FORMAT.md §10).
        public let formatVersion: Int
        /// Sign with the home's signing key, if its key store holds one (version 3 only).
        public var sign = true
        /// Into a store, version 3: build on what this home shipped there before.
        public var incremental: Incremental?
        /// Who the archive opens for (`IncrementalBase`: a change makes a full archive).
        public var access = ""
        /// One item in this many ends a page, on average (smaller in tests and fixtures, to
        /// make many pages of few items; a power of two).
        public var pageAverage = PackedLayout.averagePageItems
        var pageCap = PackedLayout.pageItemsCap

        public struct Incremental: Sendable {
            /// A dependency may be at most this old (seconds); older, and the night is full.
            public let fullEvery: TimeInterval
            /// An unchanged night writes nothing (instead of a small "same as" archive).
            public let skipIfUnchanged: Bool

            public init(fullEvery: TimeInterval, skipIfUnchanged: Bool) {
                self.fullEvery = fullEvery
                self.skipIfUnchanged = skipIfUnchanged
            }
        }

        public init(mode: ArchiveMode, compartments: Set<Compartment>, kdf: Argon2Parameters, destination: Destination,
                    home: N11Home, now: Date = Date(), formatVersion: Int = ArchiveHeader.currentVersion) {
            self.mode = mode
            self.compartments = compartments
            self.kdf = kdf
            self.destination = destination
            self.home = home
            self.now = now
            self.formatVersion = formatVersion
        }
    }

    public struct Report {
        /// nil: an unchanged night with `skipIfUnchanged`, nothing written.
        public let archive: ArchiveCreator.Report?
        /// Where it was published (a path or `REMOTE:PATH`), "-" for standard output; for a
        /// night skipped as unchanged, the store.
        public let location: String
        public let upload: Publication.Upload?
        /// Live items of the compartments the archive does not include, per compartment.
        public let leftOut: [Compartment: Int]
        /// With `incremental`: why the archive is a full one instead (nil: it is incremental).
        public let fullBecause: String?
        /// A failure to keep the record of what was shipped (the archive is published; the
        /// next night builds on the record of the one before).
        public let recordProblem: String?
    }

    /// `access` says who the archive is for (asking for a password if need be); it is called
    /// after the vault was read and before anything is written.
    public static func run(from vault: Vault, _ request: Request, progress: ArchiveProgress?,
                           access: @escaping () throws -> ArchiveAccess) throws -> Report {
        // The catalogue is streamed, a batch at a time, by every pass: memory does not grow
        // with the vault (issue 34). What the archive leaves out is counted by the first pass
        // that walks every item (the night's decision, the layout of a version 3 archive), not
        // by a pass of its own.
        func countLeftOut() throws -> [Compartment: Int] {
            var census = CatalogueCensus(compartments: request.compartments, now: request.now)
            try vault.forEachItemInIDOrder { batch, _ in
                for item in batch { _ = census.lists(item) }
                return true
            }
            return census.leftOut
        }
        // Version 1 and 2 archives have no such pass: counted first, so that nothing can fail
        // after the archive is published.
        let leftOutBefore = request.formatVersion == 3 ? nil : try countLeftOut()
        // An incremental night: what the destination holds, and this home's record of it.
        var base: IncrementalBase? = nil, fullBecause: String? = nil, recordWarning: String? = nil
        var recorded: (record: ShipmentRecord, state: ShipmentRecord.Destination?)? = nil
        if case .store(let store, _, _) = request.destination, request.formatVersion == 3 {
            if let (record, aside) = try? ShipmentRecord.openSettingAsideDamage(in: request.home) {
                recorded = (record, try? record.destination(store.location))
                if let aside { recordWarning = "the record of what this home shipped did not read; it was set aside as \(aside) and begun anew" }
            } else {
                recordWarning = "the record of what this home shipped (\(Path.join(request.home.root, ShipmentRecord.fileName))) cannot be opened"
            }
            // Decided before anything is published only when an unchanged night is skipped;
            // otherwise under the store's lock, from the listing the lock made (on a remote,
            // one rclone start less).
            if let incremental = request.incremental, incremental.skipIfUnchanged {
                (base, fullBecause) = try decide(incremental, store: store, recorded: recorded, vault: vault, request)
                // Unless the walk met a record that does not open: the night is then made, and
                // its layout pass refuses it as a full create does (not "unchanged", exit 0).
                if let base, base.sameAs != nil, base.census?.sawDamage == false {
                    return Report(archive: nil, location: store.location, upload: nil, leftOut: base.census?.leftOut ?? [:],
                                  fullBecause: nil, recordProblem: recordWarning)
                }
            }
        }
        func create(at path: String, replaceExisting: Bool = false,
                    follower: ((FileDescriptor) -> any FinalPrefixObserver)? = nil) throws -> ArchiveCreator.Report {
            // (Again under the lock when an unchanged night was to be skipped: the night did change.)
            if let incremental = request.incremental, case .store(let store, _, _) = request.destination {
                (base, fullBecause) = try decide(incremental, store: store, recorded: recorded, vault: vault, request)
            }
            // An incremental night's password slot keeps its chain's salt and cost, so that a
            // restore derives the key once for every archive it reads (DESIGN.md §8.3); and
            // the password must be the chain's: it must open the last archive's slot, or the
            // night is a full archive (one restore, one password).
            var asked: ArchiveAccess? = nil
            if base != nil, let chain = recorded?.state.flatMap({ Self.passwordChain(parsing: $0.passwordKDF) }) {
                var who = try access()
                if who.passwords.count == 1, who.kdf.opsLimit == chain.kdf.opsLimit, who.kdf.memoryBytes >> 10 == chain.kdf.memoryKiB {
                    let kek = try ArchiveKeys.portableKEK(password: who.passwords[0], kdf: chain.kdf)
                    if (try? ArchiveKeys.unwrapSlot(chain.wrap, kek: kek, archiveID: chain.archiveID)) != nil {
                        who.passwordSalts = [chain.kdf.saltBytes]
                        who.passwordKEKs = [kek]
                    } else {
                        (base, fullBecause) = (nil, "the password is not the one the archives there open with")
                    }
                } else if !who.passwords.isEmpty {
                    (base, fullBecause) = (nil, "the password or its Argon2id cost changed since the last archive")
                }
                asked = who
            }
            var creation = ArchiveCreator.Request(mode: request.mode, compartments: request.compartments, output: path,
                                                  replaceExisting: replaceExisting, kdf: request.kdf, now: request.now,
                                                  formatVersion: request.formatVersion)
            creation.signingKey = request.sign ? vault.keyStore.signingKey : nil
            creation.incremental = base
            (creation.pageAverage, creation.pageCap) = (request.pageAverage, request.pageCap)
            creation.shipmentRecord = recorded?.record
            creation.follower = follower
            let report = try ArchiveCreator.create(from: vault, creation, progress: progress) { try asked ?? access() }
            created = report.archiveID
            return report
        }
        // Rows staged for an archive are taken by `replace`; whatever else happens (not
        // published, not recorded), they are dropped.
        var created: String? = nil
        defer { if let created { recorded?.record.discard(night: created) } }
        let report: ArchiveCreator.Report, location: String, upload: Publication.Upload?
        switch request.destination {
        case let .file(path, replaceExisting):
            report = try create(at: path, replaceExisting: replaceExisting)
            (location, upload) = (Path.absolute(report.path), nil)
        case let .store(store, name, options):
            let publication = try store.publishNew(name: name, at: request.now, options) { try create(at: $0.path, follower: $0.follower) }
            (report, location, upload) = (publication.report, publication.location, publication.upload)
        case .standardOutput(let spool):
            report = try toStandardOutput(spool: spool) { try create(at: $0) }
            (location, upload) = ("-", nil)
        }
        try WrittenArchives.record(report, created: request.now, location: location, in: request.home)
        var recordProblem: String? = report.stagingProblem
        if let recorded, recordProblem == nil {
            do {
                try recorded.record.replace(Self.storeLocation(request), with: try state(after: report, at: location, request: request,
                                                                                         vault: vault, before: recorded.state),
                                            stagedNight: base?.sameAs == nil ? report.archiveID : nil, items: report.items,
                                            pages: report.manifestPages)
            } catch { recordProblem = "\(error)" }
        }
        if let recordWarning { recordProblem = recordProblem.map { recordWarning + "; " + $0 } ?? recordWarning }
        return Report(archive: report, location: location, upload: upload, leftOut: try report.leftOut ?? leftOutBefore ?? countLeftOut(),
                      fullBecause: fullBecause, recordProblem: recordProblem)
    }

    /// What the night builds on, or why it is a full archive: the vault's catalogue and the
    /// record's items walked side by side in ID order.
    private static func decide(_ incremental: Request.Incremental, store: any ArchiveStore,
                               recorded: (record: ShipmentRecord, state: ShipmentRecord.Destination?)?,
                               vault: Vault, _ request: Request) throws -> (IncrementalBase?, String?) {
        let location = store.location
        let shipped: ShippedItems.Walk = { from, through in
            guard let record = recorded?.record else { throw ArchiveError.damaged(archive: location, what: "no record") }
            return try record.items(of: location, from: from, through: through)
        }
        // The walk counts what it sees, for an unchanged night's report (`PackedLayout(unchanged:)`).
        var census = CatalogueCensus(compartments: request.compartments, now: request.now)
        let pages = try recorded?.state?.pagesRecorded == true ? recorded?.record.pages(of: location) ?? [] : []
        let decision = try IncrementalBase.decide(
            record: recorded?.state, shipped: shipped, pages: pages, objects: try store.list(),
            items: { body in
                try vault.forEachItemInIDOrder { batch, damagedIDs in
                    census.noteDamage(damagedIDs)
                    for item in batch where census.lists(item) { try body(item) }
                    return true
                }
            },
            mode: request.mode, access: request.access, vaultKeys: try vaultKeys(of: vault, request),
            now: request.now, fullEvery: incremental.fullEvery, pageAverage: request.pageAverage, pageCap: request.pageCap)
        switch decision {
        case .incremental(var decided):
            decided.census = census
            return (decided, nil)
        case .full(let why): return (nil, why)
        }
    }

    /// `opsLimit:memoryKiB:salt:wrap:archiveID` (hex), as the record keeps the last
    /// archive's password slot: its Argon2id, and what it wraps for which archive.
    private static func passwordChain(parsing text: String) -> (kdf: ArchiveHeader.KDF, wrap: [UInt8], archiveID: [UInt8])? {
        let parts = text.split(separator: ":").map(String.init)
        guard parts.count == 5, let ops = UInt64(parts[0]), let memory = UInt64(parts[1]),
              let salt = [UInt8](hex: parts[2], length: 16), let wrap = [UInt8](hex: parts[3], length: parts[3].count / 2),
              let archiveID = [UInt8](hex: parts[4], length: 16) else { return nil }
        return (ArchiveHeader.KDF(opsLimit: ops, memoryKiB: memory, salt: salt), wrap, archiveID)
    }

    private static func storeLocation(_ request: Request) -> String {
        if case .store(let store, _, _) = request.destination { return store.location }
        return ""
    }

    /// Secure archives: the compartment key IDs their items are sealed under.
    private static func vaultKeys(of vault: Vault, _ request: Request) throws -> String {
        guard request.mode == .secure else { return "" }
        return try request.compartments.sorted { $0.rawValue < $1.rawValue }
            .map { "\($0.rawValue):\(try vault.keyStore.currentKeyID(for: $0).hex)" }.joined(separator: ",")
    }

    /// The destination's record once `report`'s archive is published at `location`: its
    /// items where they are, and the archives that hold them (the new one among them).
    private static func state(after report: ArchiveCreator.Report, at location: String, request: Request, vault: Vault,
                              before: ShipmentRecord.Destination?) throws -> ShipmentRecord.Destination {
        var archives: [String: ShipmentRecord.Archive] = [:]
        archives[report.archiveID] = .init(id: report.archiveID, name: SignerTrust.lastComponent(of: location), size: report.archiveBytes,
                                           created: request.now)
        // The archives its items and its page list are in: its dependencies (each holds some
        // item, or the list) and itself.
        for id in Set(report.dependsOn).union([report.listArchive]) where archives[id] == nil {
            guard let known = before?.archives[id] else { throw ArchiveError.damaged(archive: location, what: "the record lost archive \(id)") }
            archives[id] = known
        }
        var state = ShipmentRecord.Destination(mode: request.mode, access: request.access, vaultKeys: try vaultKeys(of: vault, request),
                                               lastArchive: report.archiveID, listArchive: report.listArchive,
                                               listRootSHA256: report.listRootSHA256, archives: archives)
        // A night that wrote its own page list staged its pages; an unchanged one keeps the
        // list (and the page rows) of the night it is the same as.
        state.pagesRecorded = report.listArchive == report.archiveID || before?.pagesRecorded == true
        if report.passwordKDFs.count == 1, let kdf = report.passwordKDFs.first, let wrap = report.firstPasswordWrap {
            state.passwordKDF = "\(kdf.opsLimit):\(kdf.memoryKiB):\(kdf.salt):\(wrap.hex):\(report.archiveID)"
        }
        return state
    }

    private static func toStandardOutput(spool: String, create: (String) throws -> ArchiveCreator.Report) throws -> ArchiveCreator.Report {
        let local = Path.join(spool, AtomicFile.tempName(for: "stdout.nu11vlt"))
        let cleanup = Interruption.onInterrupt { try? FileSystem.removeFile(local) }
        defer {
            try? FileSystem.removeFile(local)
            Interruption.cancel(cleanup)
        }
        let report = try create(local)
        let source = try FileDescriptor.openForReading(local)
        let stdout = FileDescriptor(borrowing: 1, path: "standard output")
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = try source.read(into: &buffer, count: buffer.count)
            if n == 0 { break }
            try stdout.write(buffer[0..<n])
        }
        return report
    }
}
