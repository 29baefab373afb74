import Foundation
import N11Crypto
import N11Format
import N11System
import N11Vault

/// Restores an unlocked archive all or nothing. Conflicts are found from the manifest
/// before anything is written; every item is then decrypted, verified and staged out of
/// sight; only when all verified does one commit make them visible. Any failure before the
/// commit leaves the destination exactly as it was.
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
    /// error naming it.
    public func indices(of selection: ItemSelection) throws(ArchiveError) -> [Int] {
        // Everything needs no item read; a pattern is matched against them all.
        if selection.isEverything { return Array(items.indices) }
        let all = try items.all()
        do { return try selection.indices(in: all, id: \.id, name: \.name) }
        catch { throw .selection(archive: reader.name, error) }
    }
}

public enum ArchiveRestorer {
    public struct Report: Sendable {
        public var restored: [String] = []
        public var replaced: [String] = []
        /// Items already in the vault whose record or content was damaged, restored again.
        public var repaired: [String] = []
        public var skippedIdentical: [String] = []
        public var skippedExpired: [String] = []
        /// Items a salvage could not restore (damaged or missing), nothing of them written.
        public var damaged: [DamagedItem] = []
        public var plaintextBytes: Int64 = 0
        public var destination = ""
        public var dryRun = false
        public init() {}
    }

    /// Restore into `vault` (opened for writing unless `dryRun`). `progress` counts the
    /// items to be written (not those skipped) as their chunks verify.
    public static func restore(_ archive: UnlockedArchive, into vault: Vault, _ options: RestoreOptions = .init(),
                               progress: ArchiveProgress? = nil) throws(ArchiveError) -> Report {
        let (overwrite, dryRun, now) = (options.overwrite, options.dryRun, options.now)
        var report = Report()
        report.destination = vault.path
        let selected = try archive.indices(of: options.selection)
        report.dryRun = dryRun
        let existing: [String: ItemMetadata]
        let damaged: Set<String>
        do {
            existing = Dictionary(try vault.items(includeExpired: true, now: now).map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
            damaged = Set(try vault.damagedItemIDs())
        } catch { throw .vault(error) }

        // Plan from the manifest (and, for items already there, their state in the vault).
        var plan: [(index: Int, replaces: ItemMetadata?, repairs: Bool)] = []
        var conflicts: [String] = []
        for index in selected {
            let item = try archive.items.item(index)
            if item.isExpired(at: now) { report.skippedExpired.append(item.id); continue }
            if damaged.contains(item.id) {
                // Its record is damaged: the archive's version repairs it.
                plan.append((index, nil, true))
                continue
            }
            if let old = existing[item.id] {
                if old.sha256 == item.sha256 && old.kind == item.kind && old.compartment == item.compartment {
                    // The same item; skip it only if its content is intact, else repair it.
                    if (try? vault.verify(old)) != nil {
                        report.skippedIdentical.append(item.id)
                    } else {
                        plan.append((index, old, true))
                    }
                    continue
                }
                conflicts.append(item.id)
            }
            plan.append((index, existing[item.id], false))
        }
        if !conflicts.isEmpty && !overwrite { throw .conflicts(ids: conflicts) }

        let salvage = options.salvage ? { (_: Int, item: Manifest.Item, error: ArchiveError) in
            report.damaged.append(.init(item, error))
        } : nil
        if dryRun {
            try ArchiveVerifier.checkAll(archive, plan.map(\.index), keyStore: vault.keyStore, salvage: salvage,
                                         progress: progress) { n, item in
                let step = plan[n]
                record(item, replaces: step.replaces, repairs: step.repairs, in: &report)
            }
            progress?.finish()
            return report
        }

        let staging: VaultStaging
        do { staging = try VaultStaging(vault: vault) } catch { throw .vault(error) }
        do {
            try ArchiveVerifier.forEachItem(archive, plan.map(\.index), progress: progress, salvage: salvage) { n, item, payload in
                let step = plan[n]
                try stage(archive, item, payload: payload, replaces: step.replaces, in: staging, progress: progress)
                if step.repairs && step.replaces == nil { try staging.stageRepair(ofDamagedID: item.id, restoredKind: item.kind) }
                record(item, replaces: step.replaces, repairs: step.repairs, in: &report)
            }
        } catch {
            staging.discard()
            throw error
        }
        do { try staging.commit(committing: "the restore") } catch { throw .vault(error) }
        progress?.finish()
        return report
    }

    private static func record(_ item: Manifest.Item, replaces: ItemMetadata?, repairs: Bool, in report: inout Report) {
        if repairs { report.repaired.append(item.id) }
        else if replaces == nil { report.restored.append(item.id) } else { report.replaced.append(item.id) }
        report.plaintextBytes += item.size
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
