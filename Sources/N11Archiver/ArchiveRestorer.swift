import Foundation
import N11Crypto
import N11Format
import N11System
import N11Vault

/// What a restore (into a vault or as an export) may do.
public struct RestoreOptions: Sendable {
    /// Replace items (or export files) that differ from the archive's.
    public var overwrite: Bool
    /// Verify and report, writing nothing.
    public var dryRun: Bool
    /// The moment fade items are judged expired at.
    public var now: Date
    /// Restore every item that verifies and report the others, instead of all or nothing.
    public var salvage: Bool
    /// The items to restore (everything by default).
    public var selection: ItemSelection

    public init(overwrite: Bool = false, dryRun: Bool = false, now: Date = Date(), salvage: Bool = false,
                selection: ItemSelection = .init()) {
        self.overwrite = overwrite
        self.dryRun = dryRun
        self.now = now
        self.salvage = salvage
        self.selection = selection
    }
}

/// An item a salvage left out: its ID, its name and why.
public struct DamagedItem: Sendable, Equatable, Encodable {
    public let id: String
    public let name: String
    public let problem: String
}

extension UnlockedArchive {
    /// The manifest positions `selection` picks, in order; a pattern that picks nothing is an
    /// error naming it. Everything is a range (nothing per item); a pattern is matched
    /// against the items a page at a time and the matches kept a bit an item (issue 34).
    public func selected(_ selection: ItemSelection) throws(ArchiveError) -> SelectedItems {
        if selection.isEverything { return .all(items.indices) }
        var matcher = ItemSelection.Matcher(selection)
        do { try items.forEach { _, item in matcher.see(id: item.id, name: item.name) } }
        catch { throw ArchiveError.wrap(error) }   // a page that no longer reads
        do { return .some(try matcher.finish()) } catch {
            // Without the root or a page, "no such item" would claim what the archive never said.
            if case .noMatch = error, let pages = pagesReadWithoutRoot {
                throw .selectionInPagesRead(archive: reader.name, error, pagesRead: pages.read,
                                            why: "the copy was cut short before its manifest's root")
            }
            if case .noMatch = error, let lost = lostPages.first {
                throw .selectionInPagesRead(archive: reader.name, error, pagesRead: packed?.pagesRead ?? 0,
                                            why: lostPages.count == 1 ? "manifest page \(lost.number) does not read"
                                                : "\(lostPages.count) manifest pages do not read")
            }
            throw .selection(archive: reader.name, error)
        }
    }
}

/// The archive positions a restore works on, in order.
public enum SelectedItems: RandomAccessCollection, Sendable {
    case all(Range<Int>)
    case some(PositionBitmap)

    /// The positions of `all` that `isWanted` keeps: the whole range if it keeps them all.
    init(_ all: SelectedItems, keeping isWanted: (Int) -> Bool, below limit: Int) {
        // A lazy filter needs an escaping closure: given `isWanted` as it is, `filter` is
        // the eager one and made an array of every kept position (24 MiB at 3,000,000 items).
        let kept = withoutActuallyEscaping(isWanted) { PositionBitmap(all.lazy.filter($0), below: limit) }
        self = kept.count == limit ? .all(0..<limit) : .some(kept)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int {
        switch self {
        case .all(let range): return range.count
        case .some(let positions): return positions.count
        }
    }
    public subscript(position: Int) -> Int {
        switch self {
        case .all(let range): return range.lowerBound + position
        case .some(let positions): return positions[position]
        }
    }

    /// Whether archive position `index` is one of these.
    public func includes(_ index: Int) -> Bool {
        switch self {
        case .all(let range): return range.contains(index)
        case .some(let positions): return positions.contains(index)
        }
    }

    /// In order, by a scan of the bitmap's words rather than a search for each position.
    public struct Iterator: IteratorProtocol {
        fileprivate enum Walk {
            case all(Range<Int>.Iterator)
            case some(PositionBitmap.Iterator)
        }
        fileprivate var walk: Walk

        public mutating func next() -> Int? {
            switch walk {
            case .all(var range): defer { walk = .all(range) }; return range.next()
            case .some(var positions): defer { walk = .some(positions) }; return positions.next()
            }
        }
    }

    public func makeIterator() -> Iterator {
        switch self {
        case .all(let range): return Iterator(walk: .all(range.makeIterator()))
        case .some(let positions): return Iterator(walk: .some(positions.makeIterator()))
        }
    }
}

/// What a restore (or an export) did with an item it was asked for.
public enum RestoreOutcome: UInt8, CaseIterable, Sendable {
    case restored = 1, replaced, repaired, skippedIdentical, skippedExpired
}

/// Restores an unlocked archive all or nothing. Conflicts are found from the manifest
/// before anything is written; every item is then decrypted, verified and staged out of
/// sight; only when all verified does one commit make them visible. Any failure before the
/// commit leaves the destination exactly as it was.
public enum ArchiveRestorer {
    /// What a restore did: each archive item's `RestoreOutcome` (`OutcomeTable`: next to
    /// nothing while most items had the same one), and counts. A report of millions of items
    /// holds no ID (issue 34): the IDs are read again from the archive, in its order, when
    /// asked for.
    public struct Report: Sendable {
        private var outcomes: OutcomeTable
        private var counts = [Int](repeating: 0, count: RestoreOutcome.allCases.count + 1)
        private let items: ArchiveItems
        /// Items a salvage could not restore (damaged or missing), nothing of them written.
        public var damaged: [DamagedItem] = []
        /// Manifest pages a salvage could not read: their items are not known by name, and
        /// none of them was restored.
        public let lostPages: [LostPage]
        public var plaintextBytes: Int64 = 0
        public var destination = ""
        public var dryRun = false

        public init(for archive: UnlockedArchive) {
            items = archive.items
            outcomes = OutcomeTable(count: archive.items.count)
            lostPages = archive.lostPages
        }

        /// Records what became of archive item `index`; each item has one outcome.
        mutating func record(_ outcome: RestoreOutcome, index: Int) {
            let old = outcomes[index]
            if old != 0 { counts[Int(old)] -= 1 }
            outcomes[index] = outcome.rawValue
            counts[Int(outcome.rawValue)] += 1
        }

        /// A salvage's item that did not verify: it has no outcome but its place in `damaged`.
        mutating func forget(index: Int) {
            let old = outcomes[index]
            if old != 0 { counts[Int(old)] -= 1 }
            outcomes[index] = 0
        }

        func outcome(of index: Int) -> RestoreOutcome? { RestoreOutcome(rawValue: outcomes[index]) }

        public func count(_ outcome: RestoreOutcome) -> Int { counts[Int(outcome.rawValue)] }

        /// Items written: restored, replaced and repaired.
        public var written: Int { count(.restored) + count(.replaced) + count(.repaired) }

        /// The archive positions with `outcome`, in order.
        func forEachIndex(_ outcome: RestoreOutcome, _ body: (Int) throws -> Void) rethrows {
            guard count(outcome) > 0 else { return }
            try outcomes.forEachIndex(of: outcome.rawValue, body)
        }

        /// The IDs with `outcome`, in archive order, each read again from the archive.
        public func forEachID(_ outcome: RestoreOutcome, _ body: (String) throws -> Void) throws {
            try forEachIndex(outcome) { try body(try items.item($0).id) }
        }

        public func ids(_ outcome: RestoreOutcome) throws -> [String] {
            var ids: [String] = []
            try forEachID(outcome) { ids.append($0) }
            return ids
        }

        public var restored: [String] { get throws { try ids(.restored) } }
        public var replaced: [String] { get throws { try ids(.replaced) } }
        /// Items already in the vault whose record or content was damaged, restored again.
        public var repaired: [String] { get throws { try ids(.repaired) } }
        public var skippedIdentical: [String] { get throws { try ids(.skippedIdentical) } }
        public var skippedExpired: [String] { get throws { try ids(.skippedExpired) } }
    }

    /// Restore into `vault` (opened for writing unless `dryRun`). `progress` counts the
    /// items to be written (not those skipped) as their chunks verify. Nothing is held per
    /// item but its outcome (issue 34): the vault is asked item by item, and what an item
    /// replaces is read again when it is staged.
    public static func restore(_ archive: UnlockedArchive, into vault: Vault, _ options: RestoreOptions = .init(),
                               progress: ArchiveProgress? = nil) throws(ArchiveError) -> Report {
        let (overwrite, dryRun, now) = (options.overwrite, options.dryRun, options.now)
        var report = Report(for: archive)
        report.destination = vault.path
        report.dryRun = dryRun
        let selected = try archive.selected(options.selection)

        // Plan from the manifest (and, for items already there, their state in the vault).
        var conflicts = FirstFew()
        do {
            // One read transaction for the plan's lookups (issue 29: four fcntl calls an item).
            try vault.readingOneState {
                for index in selected {
                    let item = try archive.items.item(index)
                    if item.isExpired(at: now) { report.record(.skippedExpired, index: index); continue }
                    switch try vault.lookUp(id: item.id) {
                    case .absent: report.record(.restored, index: index)
                    case .damaged:
                        // Its record is damaged: the archive's version repairs it.
                        report.record(.repaired, index: index)
                    case .item(let old):
                        if old.sha256 == item.sha256 && old.kind == item.kind && old.compartment == item.compartment {
                            // The same item; skip it only if its content is intact, else repair it.
                            report.record((try? vault.verify(old)) != nil ? .skippedIdentical : .repaired, index: index)
                            continue
                        }
                        if !overwrite { conflicts.append(item.id) }
                        report.record(.replaced, index: index)
                    }
                }
            }
        } catch let error as ArchiveError { throw error } catch let error as VaultError { throw .vault(error) } catch { throw ArchiveError.wrap(error) }
        if !conflicts.isEmpty && !overwrite { throw .conflicts(ids: conflicts) }
        // The positions to write, as a range when that is all of them (nothing per item).
        let writing = SelectedItems(selected, keeping: { index in
            [RestoreOutcome.restored, .replaced, .repaired].contains { report.outcome(of: index) == $0 }
        }, below: archive.items.count)
        // A salvage's damaged item was planned as written: it is counted as damaged instead.
        let salvage = options.salvage ? { (n: Int, item: Manifest.Item, error: ArchiveError) in
            report.forget(index: writing[n])
            report.damaged.append(.init(item, error))
        } : nil
        if dryRun {
            try ArchiveVerifier.checkAll(archive, writing, keyStore: vault.keyStore, salvage: salvage,
                                         progress: progress) { _, item in
                report.plaintextBytes += item.size
            }
            progress?.finish()
            return report
        }

        let staging: VaultStaging
        do { staging = try VaultStaging(vault: vault) } catch { throw .vault(error) }
        do {
            try ArchiveVerifier.forEachItem(archive, writing, progress: progress, salvage: salvage) { n, item, payload in
                // What it replaces, read again (the vault is locked: the same as planned).
                let replaces: ItemMetadata?
                if case .item(let old) = try vault.lookUp(id: item.id) { replaces = old } else { replaces = nil }
                try stage(archive, item, payload: payload, replaces: replaces, in: staging, progress: progress)
                if replaces == nil && report.outcome(of: writing[n]) == .repaired {
                    try staging.stageRepair(ofDamagedID: item.id, restoredKind: item.kind)
                }
                report.plaintextBytes += item.size
            }
        } catch {
            staging.discard()
            throw error
        }
        do { try staging.commit(committing: "the restore") } catch { throw .vault(error) }
        progress?.finish()
        return report
    }

    /// Stages item `index` from its payload. Portable: verified plaintext sealed into a vault
    /// file. Secure: the vault file as archived, its inner tag and plaintext digest verified
    /// on the way.
    private static func stage(_ archive: UnlockedArchive, _ item: Manifest.Item, payload source: ByteSource, replaces: ItemMetadata?,
                              in staging: VaultStaging, progress: ArchiveProgress?) throws {
        let payload = progress.counting(source, size: item.size)
        switch archive.header.mode {
        case .portable: try staging.stage(item.vaultDescription, replaces: replaces, sealing: payload)
        case .secure:
            try staging.stage(item.vaultDescription, replaces: replaces, copyingSealed: payload,
                              sealedUnder: try archive.compartmentKey(of: item, in: staging.vault.keyStore))
        }
        progress.complete(payload)
    }
}

extension DamagedItem {
    /// The reason alone ("authentication failed …"): the message already names the archive
    /// and the item.
    init(_ item: Manifest.Item, _ error: ArchiveError) {
        var problem = error.description
        if case .damaged(_, let what) = error { problem = what.withinItem.description }
        self.init(id: item.id, name: item.name, problem: problem)
    }
}

extension Manifest.Item {
    /// The vault item this archive item becomes.
    var vaultDescription: VaultStaging.Description {
        .init(id: id, kind: kind, compartment: compartment, name: name, created: created, expires: expires, size: size,
              sha256: sha256)
    }
}
