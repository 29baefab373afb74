import Foundation
import N11Crypto
import N11System
import N11Vault

/// `prune`: deletes the dated archives of a store that a retention policy does not keep, the
/// same way for a local directory and a remote, under the store's exclusive lock (no create
/// writes into it and no other prune runs meanwhile).
///
/// Only this home's archives count (DESIGN.md §3.8): one it recorded writing (the record
/// names the object, or the object's header names the record and the store shows it is the
/// archive written), or one whose header opens with this prune's password or key store
/// through a password or device slot. A recipient slot proves nothing (anyone may hold the
/// public key), files of other users are never read, and one archive ID counts once. When
/// the policy keeps every archive there, nothing is opened and no secret is needed. Before
/// anything is deleted the newest counted archive is verified in full, and a newer file with
/// an archive's name that does not read as one stops the prune: it may be the real newest
/// backup, damaged. With a trusted signer (`UnlockSources.signerTrust`), what counts is an
/// archive a trusted key signed, under its own date: no secret is needed, and whatever else
/// is there is never counted, so never deleted.
public enum ArchivePruner {
    public struct Request {
        public let policy: ArchiveRetention.Policy
        public let dryRun: Bool
        public let home: N11Home
        public let secrets: UnlockSources
        public let kdfCeiling: KDFCeiling
        /// How long to wait for the store's lock (`--lock-wait`).
        public let lockWait: Double
        /// Told each thing worth a warning or note as it is found, before anything is decided.
        public let notice: (Notice) -> Void
        /// Progress of the newest archive's download (a remote) and verification.
        public let progress: (_ phase: String) -> ArchiveProgress?

        public init(policy: ArchiveRetention.Policy, dryRun: Bool, home: N11Home, secrets: UnlockSources, kdfCeiling: KDFCeiling,
                    lockWait: Double = 0, notice: @escaping (Notice) -> Void = { _ in },
                    progress: @escaping (String) -> ArchiveProgress? = { _ in nil }) {
            self.lockWait = lockWait
            self.policy = policy
            self.dryRun = dryRun
            self.home = home
            self.secrets = secrets
            self.kdfCeiling = kdfCeiling
            self.notice = notice
            self.progress = progress
        }
    }

    public enum Notice {
        /// Leftovers of failed writes removed (with `dryRun`: that would be).
        case leftovers(Int)
        /// An object with an archive's name that belongs to another user: left alone.
        case foreign(path: String, owner: UInt32)
        /// An object with an archive's name that does not read as one: left alone.
        case unreadable(path: String)
        /// An archive that is not counted as this home's: left alone.
        case notCounted(ArchiveRetention.NotOpened)
        /// The newest archive is about to be fetched or read whole to be verified.
        case verifying(path: String)
        /// An archive was just deleted (not with `dryRun`): told one by one, so that a run cut
        /// short (Ctrl-C, a failing remote) still says what it deleted.
        case deleted(path: String)
    }

    public struct Report {
        public var decision = ArchiveRetention.Decision()
        /// The newest archive, verified before anything was deleted (nil: nothing to delete).
        public var verified: String?
        /// Deleted (with `dryRun`: would be), newest first.
        public var deleted: [String] = []
        public var unreadable: [String] = []
        public var foreign: [String] = []
        public var notCounted: [ArchiveRetention.NotOpened] = []
        /// Whether any archive counted (kept or deleted).
        public var countedAny: Bool { !decision.keep.isEmpty }
    }

    /// An archive of the store as prune judges it: its header's key entries, or (when a
    /// record named the object by place and size, and its header was not read) that record.
    private struct Found {
        let object: StoredObject
        let candidate: ArchiveRetention.Candidate
        let keys: ArchiveKeyEntries?
        let record: WrittenArchives.Record?
    }

    public static func prune(_ store: any ArchiveStore, _ request: Request) throws(ArchiveError) -> Report {
        let lock = try store.lock(exclusive: true, waitSeconds: request.lockWait)
        defer { lock.release() }
        return try pruneLocked(store, request)
    }

    private static func pruneLocked(_ store: any ArchiveStore, _ request: Request) throws(ArchiveError) -> Report {
        var report = Report()
        let leftovers = store.removeLeftovers(dryRun: request.dryRun)
        if leftovers > 0 { request.notice(.leftovers(leftovers)) }

        let records = WrittenArchives.all(in: request.home)
        // With a trusted signer, a signature is what counts (DESIGN.md §8.4): every header is
        // read, and an archive no trusted key signed is never counted, so never deleted.
        let trust = request.secrets.signerTrust
        var untrusted: [ArchiveRetention.NotOpened] = []
        var found: [Found] = [], foreignOwners: [UInt32] = [], unreadableNames: [String] = []
        for object in try store.list() where ArchiveRetention.isArchiveName(object.name) {
            let path = store.location(of: object.name)
            if let owner = object.foreignOwner {
                report.foreign.append(path)
                foreignOwners.append(owner)
                request.notice(.foreign(path: path, owner: owner))
            } else if !trust.isActive, let record = store.recorded(object, in: records) {
                found.append(Found(object: object, candidate: .init(path: path, created: record.created), keys: nil, record: record))
            } else if let keys = try store.keyEntries(of: object), trust.isActive || keys.signature != .invalid {
                if let refusal = trust.refusal(keys.signature, header: keys.header, fileName: object.name) {
                    untrusted.append(.init(path: path, reason: refusal.description))
                    continue
                }
                found.append(Found(object: object, candidate: .init(path: path, created: keys.header.created), keys: keys, record: nil))
            } else {
                report.unreadable.append(path)
                unreadableNames.append(object.name)
                request.notice(.unreadable(path: path))
            }
        }
        // Archives are there and none is the user's: a prune that says "nothing to prune"
        // every night while the disk fills up (a mount that maps every file to another uid, a
        // job run as the wrong user) must be noticed.
        if found.isEmpty && report.unreadable.isEmpty, let owner = foreignOwners.first {
            throw .othersArchives(directory: store.location, count: foreignOwners.count, owner: owner)
        }

        // When the policy keeps every archive there, it keeps every subset too (an archive's
        // rank and its bucket can only move up when others drop out): nothing can be deleted,
        // so nothing is opened and no secret is needed.
        var counted: [Found]
        if trust.isActive {
            // Signed by a trusted key: this home's (or its writing machine's), with no secret.
            (counted, report.notCounted) = onceEach(found)
        } else if ArchiveRetention.apply(request.policy, to: found.map(\.candidate)).remove.isEmpty {
            counted = found
        } else {
            (counted, report.notCounted) = try thisHomes(found, in: store, records: records, request)
        }
        report.notCounted = untrusted + report.notCounted
        for other in report.notCounted { request.notice(.notCounted(other)) }
        if counted.isEmpty && !report.notCounted.isEmpty {
            if trust.isActive { throw .noneTrusted(directory: store.location, count: report.notCounted.count) }
            throw .noneOfThisHome(directory: store.location, count: report.notCounted.count)
        }

        report.decision = ArchiveRetention.apply(request.policy, to: counted.map(\.candidate))
        try keepDependencies(of: &report.decision, counted: counted, in: store)
        guard let newest = report.decision.keep.first?.archive, !report.decision.remove.isEmpty,
              let newestFound = counted.first(where: { $0.candidate == newest }) else { return report }
        try refuseIfNewerUnreadable(zip(unreadableNames, report.unreadable).map { ($0, $1) }, than: newestFound)
        try verify(newestFound, in: store, request)
        report.verified = newest.path

        let byPath = Dictionary(counted.map { ($0.candidate.path, $0.object) }, uniquingKeysWith: { first, _ in first })
        let doomed = report.decision.remove.compactMap { byPath[$0.path] }
        if request.dryRun {
            report.deleted = report.decision.remove.map(\.path)
        } else {
            for object in doomed {
                do { try store.delete(object) } catch {
                    if !report.deleted.isEmpty { try? store.finishDeleting() }
                    throw .deleteFailed(error, directory: store.location, deletedBefore: report.deleted.count)
                }
                report.deleted.append(store.location(of: object.name))
                request.notice(.deleted(path: store.location(of: object.name)))
            }
            if !report.deleted.isEmpty { try store.finishDeleting() }
        }
        return report
    }

    /// An incremental archive needs every archive its header's `dependsOn` names (DESIGN.md
    /// §8.3): each one the policy would remove is kept instead, "needed by" the kept one, and
    /// so on for what that one needs (every kept archive must still restore). So no
    /// deletion, and no kill in the middle of the deletions, breaks a kept archive. A kept
    /// archive whose header cannot be read now keeps everything.
    private static func keepDependencies(of decision: inout ArchiveRetention.Decision, counted: [Found],
                                         in store: any ArchiveStore) throws(ArchiveError) {
        guard !decision.remove.isEmpty else { return }
        let byPath = Dictionary(counted.map { ($0.candidate.path, $0) }, uniquingKeysWith: { first, _ in first })
        var removable: [String: ArchiveRetention.Candidate] = [:]   // by archive ID
        for candidate in decision.remove {
            if let found = byPath[candidate.path], let id = found.keys?.header.archiveIDHex ?? found.record?.archiveID { removable[id] = candidate }
        }
        var work = decision.keep.map(\.archive)
        while let kept = work.popLast() {
            guard let found = byPath[kept.path] else { continue }
            var header = found.keys?.header
            if header == nil { header = try store.keyEntries(of: found.object)?.header }
            guard let header else {
                // Cannot tell what it needs: delete nothing.
                decision.keep += decision.remove.map { ($0, ["needed: \(SignerTrust.lastComponent(of: kept.path)) cannot be read to tell what it needs"]) }
                decision.remove = []
                return
            }
            for dependency in header.dependsOn {
                guard let needed = removable.removeValue(forKey: dependency.hex) else { continue }
                decision.keep.append((needed, ["needed by \(SignerTrust.lastComponent(of: kept.path))"]))
                work.append(needed)
            }
        }
        let stillRemovable = Set(removable.values.map(\.path))
        decision.remove = decision.remove.filter { stillRemovable.contains($0.path) }
        decision.keep.sort { ArchiveRetention.newestFirst($0.archive, $1.archive) }
    }

    /// One archive ID counts once: of the files that claim it, the one with the bare dated
    /// name (`create` adds `-N` only when that name is taken), else the lowest `-N`; so a
    /// copy planted beside an archive never takes its count, in any store's listing order.
    private static func onceEach(_ found: [Found]) -> ([Found], [ArchiveRetention.NotOpened]) {
        var seen = Set<String>(), counted: [Found] = [], others: [ArchiveRetention.NotOpened] = []
        let ordered = found.sorted { a, b in
            let x = ArchiveRetention.sequence(of: a.object.name), y = ArchiveRetention.sequence(of: b.object.name)
            return x != y ? x < y : a.object.name < b.object.name
        }
        for item in ordered {
            let id = item.keys?.header.archiveIDHex ?? item.record?.archiveID ?? item.candidate.path
            if seen.insert(id).inserted { counted.append(item) }
            else { others.append(.init(path: item.candidate.path, reason: "another file here is already counted as archive \(id)")) }
        }
        return (counted, others)
    }

    /// Splits `found` into this home's archives and the others (see the type's comment).
    /// A failure that is not about an archive (I/O, a locked or damaged key store) is thrown:
    /// nothing may be decided then. An archive that needs a password when none was given is
    /// not counted: a file someone planted must not stop an unattended prune.
    private static func thisHomes(_ found: [Found], in store: any ArchiveStore, records: [WrittenArchives.Record],
                                  _ request: Request) throws(ArchiveError) -> ([Found], [ArchiveRetention.NotOpened]) {
        let recordsByID = Dictionary(records.map { ($0.archiveID, $0) }, uniquingKeysWith: { first, _ in first })
        func record(of item: Found) -> WrittenArchives.Record? { item.keys.flatMap { recordsByID[$0.header.archiveIDHex] } }
        // Named by a record first, then the file at its record's place, so that a copy never
        // takes the original's count.
        func rank(_ item: Found) -> Int {
            if item.keys == nil { return 0 }
            return record(of: item)?.isAt(item.candidate.path) == true ? 1 : 2
        }
        // Stable: within a rank, the store's listing order.
        let ordered = found.enumerated().sorted { (rank($0.element), $0.offset) < (rank($1.element), $1.offset) }.map(\.element)
        var ours: [Found] = [], notOpened: [ArchiveRetention.NotOpened] = []
        var countedIDs = Set<String>()
        for item in ordered {
            guard let keys = item.keys else {
                // Named by a record: its ID is the record's.
                if let record = item.record { countedIDs.insert(record.archiveID) }
                ours.append(item)
                continue
            }
            let id = keys.header.archiveIDHex
            guard !countedIDs.contains(id) else {
                notOpened.append(.init(path: item.candidate.path, reason: "another file here is already counted as archive \(id)"))
                continue
            }
            if let record = recordsByID[id], try store.check(item.object, against: record, home: request.home) == .written {
                countedIDs.insert(id)
                ours.append(Found(object: item.object, candidate: .init(path: item.candidate.path, created: record.created),
                                  keys: keys, record: record))
                continue
            }
            do {
                // No identity is given, so what opens is a password or device slot.
                guard try keys.authenticate(password: { try request.secrets.password(cost: keys.header.passwordKDFs.first) },
                                            keyStore: request.secrets.keyStore,
                                            kdfCeiling: request.kdfCeiling, kdfCache: request.secrets.kdfCache).provesOrigin else { continue }
                countedIDs.insert(id)
                ours.append(item)
            } catch {
                switch error {
                case .noKeyOpens, .passwordNeeded, .wrongPassword, .keyNotHere, .damaged, .notAnArchive, .unsupported,
                     .kdfAboveCeiling, .kdfWorkAboveCeiling, .vault(.notInitialized):
                    // (.vault(.notInitialized): a secure archive, and no key store here.)
                    notOpened.append(.init(path: item.candidate.path, reason: ArchiveRetention.NotOpened.reason(for: error)))
                default:
                    throw error
                }
            }
        }
        return (ours, notOpened)
    }

    /// A file named as a later archive than the newest counted one, that does not read as an
    /// archive, is the real newest backup, damaged: verifying an older one instead would let
    /// prune delete the last good copies while the latest is garbage. So nothing is deleted.
    /// (Compared by name, since its header is what cannot be read; a same-second `-N` counts.)
    private static func refuseIfNewerUnreadable(_ unreadable: [(name: String, path: String)], than newest: Found) throws(ArchiveError) {
        func order(_ name: String) -> (stamp: String, sequence: Int) {
            let stem = name.dropFirst(ArchiveRetention.namePrefix.count).dropLast(ArchiveRetention.nameSuffix.count)
            let rest = stem.dropFirst(16)
            return (String(stem.prefix(16)), rest.hasPrefix("-") ? Int(rest.dropFirst()) ?? 1 : 1)
        }
        let headerStamp = order(ArchiveRetention.fileName(for: newest.candidate.created)).stamp
        // The counted archive's place: its time's second, and its name's -N when the name
        // carries that same second (a renamed archive counts as the bare name).
        let named = order(newest.object.name)
        let newestOrder = (stamp: headerStamp, sequence: named.stamp == headerStamp ? named.sequence : 1)
        for (name, path) in unreadable {
            let candidate = order(name)
            guard candidate.stamp > newestOrder.stamp
                || (candidate.stamp == newestOrder.stamp && candidate.sequence > newestOrder.sequence) else { continue }
            throw .newestUnreadable(path: path)
        }
    }

    /// Verifies the newest archive in full: with the password, an identity or the key store;
    /// one made for recipients elsewhere is sound if it is byte for byte what this home wrote.
    private static func verify(_ newest: Found, in store: any ArchiveStore, _ request: Request) throws(ArchiveError) {
        request.notice(.verifying(path: newest.candidate.path))
        do {
            let fetched = try store.fetch(newest.object, progress: request.progress("download"))
            defer { fetched.release() }
            let reader = try ArchiveReader(path: fetched.path, name: fetched.name)
            // An incremental newest archive is verified with the archives it needs, from
            // this same store (prune holds its lock, so none goes meanwhile).
            if !reader.header.dependsOn.isEmpty { request.secrets.dependencies = StoreDependencies(store) }
            let archive: UnlockedArchive
            do {
                archive = try reader.unlock(with: request.secrets, kdfCeiling: request.kdfCeiling)
            } catch {
                switch error {
                case .noKeyOpens, .passwordNeeded:
                    // Byte for byte what this home wrote is sound too; if it is not this
                    // home's, what is missing is the key (say that, not "no record").
                    do { try WrittenArchives.check(fetched.path, name: fetched.name, in: request.home) }
                    catch ArchiveError.notWrittenHere { throw error }
                    return
                default: throw error
                }
            }
            _ = try ArchiveVerifier.verify(archive, keyStore: archive.header.mode == .secure ? try request.secrets.keyStore() : nil,
                                           progress: request.progress("verify"))
        } catch let error as CategorizedError {
            throw .newestNotVerified(error)
        } catch {
            throw .newestNotVerified(UnclassifiedError(error, context: nil))
        }
    }
}
