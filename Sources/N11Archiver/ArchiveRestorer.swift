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

    public init(overwrite: Bool = false, dryRun: Bool = false, now: Date = Date()) {
        self.overwrite = overwrite
        self.dryRun = dryRun
        self.now = now
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
        for (index, item) in archive.manifest.items.enumerated() {
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

        let path = archive.reader.name
        let payloads = try ArchiveVerifier.startPayloads(archive, plan.map(\.index), progress: progress)
        defer { payloads.finish() }
        if dryRun {
            try ArchiveVerifier.checkAll(archive, plan.map(\.index), payloads: payloads, keyStore: vault.keyStore,
                                         progress: progress) { n in
                let step = plan[n]
                record(archive.manifest.items[step.index], replaces: step.replaces, repairs: step.repairs, in: &report)
            }
            progress?.finish()
            return report
        }

        let staging: VaultStaging
        do { staging = try VaultStaging(vault: vault) } catch { throw .vault(error) }
        for (n, step) in plan.enumerated() {
            let item = archive.manifest.items[step.index]
            do {
                try stage(archive, index: step.index, payload: payloads.stream(n), replaces: step.replaces, in: staging,
                          progress: progress)
                if step.repairs && step.replaces == nil { staging.stageRepair(ofDamagedID: item.id, restoredKind: item.kind) }
            } catch {
                staging.discard()
                throw .itemFailed(archive: path, id: item.id, error)
            }
            record(item, replaces: step.replaces, repairs: step.repairs, in: &report)
        }
        do { try staging.commit() } catch { throw .vault(error) }
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
    private static func stage(_ archive: UnlockedArchive, index: Int, payload source: ByteSource, replaces: ItemMetadata?,
                              in staging: VaultStaging, progress: ArchiveProgress?) throws {
        let item = archive.manifest.items[index]
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

extension Manifest.Item {
    /// The vault item this archive item becomes.
    var vaultDescription: VaultStaging.Description {
        .init(id: id, kind: kind, compartment: compartment, name: name, created: created, expires: expires, size: size,
              sha256: sha256)
    }
}
