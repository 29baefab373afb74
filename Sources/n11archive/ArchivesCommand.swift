import ArgumentParser
import Foundation
import N11Archiver
import N11Format
import N11System

struct Archives: ParsableCommand, ChoosesOutput {
    static let configuration = CommandConfiguration(
        abstract: "List the archives in a directory or on a remote, with size, time and mode.",
        discussion: """
        Examples:
          n11archive archives ~/backups
          n11archive archives b2:my-bucket/n11 --json
        Lists the files named *.nu11vlt (dated by `create --output-dir` or not), newest \
        first by the time in their header, as prune orders them. Time and \
        mode come from each archive's header, which is read without any key and so not \
        authenticated (`verify` does that), except a signature, which is checked with no \
        key: SIGNED BY is the fingerprint of the key whose signature verified. KIND is full, or \
        for an incremental archive how many others it needs; FREES is what deleting it \
        would free (nothing while another archive here needs it: prune keeps it then). With a \
        trusted signer (`key trust`, --signed-by) a TRUSTED column says which ones prune \
        counts, and a warning gives the reason for each it does not. On a remote only the first 64 KiB of each \
        archive are fetched.
        """)

    @Argument(help: ArgumentHelp("The directory: a path, or REMOTE:PATH on an rclone remote.", valueName: "DIR"), completion: .directory)
    var directory: String
    @Flag(help: "Print one JSON document (also on failure).") var json = false
    @OptionGroup var store: StoreOptions
    @OptionGroup var trust: SignerTrustOptions

    struct Entry: Encodable {
        let archive: String
        let size: Int64
        let created: Date?
        let mode: String?
        let formatVersion: Int?
        /// The uid of another user who owns the file: its header is not read (DESIGN.md §3.8).
        let ownerUid: UInt32?
        /// `none`, `verified` or `invalid` (the header changed after it was signed); nil when
        /// the header was not read.
        let signature: String?
        /// The fingerprint of the key whose signature verified.
        let signedBy: String?
        /// With a trusted signer: why prune would not count it (nil: it would, or no rule).
        var notTrusted: String?
        let archiveId: String?
        /// The archives (IDs) a restore of it also reads: empty for a full archive.
        let dependsOn: [String]?
        /// The archives here (names) that need it, and so the bytes deleting it would free:
        /// its size when none does, else 0.
        var neededBy: [String] = []
        var freesBytes: Int64? = nil
        /// Of `dependsOn`, the archives that are not here: a restore of it stops at them.
        var missingDependencies: [String]? = nil
    }

    struct Document: Encodable {
        let outcome = "ok", command = "archives"
        let directory: String
        let archives: [Entry]
        let durationSeconds: Double
    }

    func run() throws {
        let trust = try self.trust.resolve(home: self.store.resolvedHome)
        let store: any ArchiveStore
        do { store = try ArchiveStores.open(directory, spool: nil, home: nil, forPrune: true) }
        catch .noArchiveDirectory(let path, _, let exists) {
            // Prune's words ("nothing was deleted") would suggest this command deletes.
            throw CLIError(.missingInput, "the archive directory '\(path)' \(exists ? "is not a directory" : "does not exist")",
                           hint: "give the directory `create --output-dir` writes to (or REMOTE:DIR)")
        }
        var entries: [Entry] = []
        for object in try store.list() where Self.isListed(object.name) {
            let path = store.location(of: object.name)
            let keys = object.foreignOwner == nil ? try store.keyEntries(of: object) : nil
            let header = keys?.header
            let signature = keys.map { keys -> String in
                switch keys.signature { case .unsigned: "none"; case .verified: "verified"; case .invalid: "invalid" }
            }
            entries.append(Entry(archive: path, size: object.size, created: header?.created, mode: header?.mode.rawValue,
                                 formatVersion: header?.version, ownerUid: object.foreignOwner, signature: signature,
                                 signedBy: keys?.signature.signer.map(SignerKeyFiles.fingerprint),
                                 notTrusted: keys.flatMap { trust.refusal($0.signature, header: $0.header, fileName: object.name)?.description },
                                 archiveId: header?.archiveIDHex, dependsOn: header.map { $0.dependsOn.map(\.hex) }))
        }
        // What each one's deletion would free: nothing while another archive here needs it.
        var neededBy: [String: [String]] = [:]
        for entry in entries { for id in entry.dependsOn ?? [] { neededBy[id, default: []].append(Self.name(entry.archive)) } }
        let here = Set(entries.compactMap(\.archiveId))
        for index in entries.indices {
            guard let id = entries[index].archiveId else { continue }
            entries[index].neededBy = (neededBy[id] ?? []).sorted()
            entries[index].freesBytes = entries[index].neededBy.isEmpty ? entries[index].size : 0
            // A chain with a link gone (deleted by hand, not copied): said here, not first by
            // the restore that needs it.
            entries[index].missingDependencies = entries[index].dependsOn?.filter { !here.contains($0) }
        }
        // Prune counts one file per archive ID (the bare name, else the lowest -N): under a
        // trust rule, mark the other copies as it would.
        if trust.isActive {
            var counted = Set<String>()
            let order = entries.indices.sorted { a, b in
                let x = ArchiveRetention.sequence(of: Self.name(entries[a].archive)), y = ArchiveRetention.sequence(of: Self.name(entries[b].archive))
                return x != y ? x < y : entries[a].archive < entries[b].archive
            }
            for index in order where entries[index].notTrusted == nil {
                guard let id = entries[index].archiveId else { continue }
                if !counted.insert(id).inserted { entries[index].notTrusted = "another file here is already counted as archive \(id)" }
            }
        }
        // Prune's order (header time, then the name's -N); an unreadable header last.
        entries.sort { a, b in
            guard let x = a.created, let y = b.created else { return a.created != nil || (b.created == nil && a.archive > b.archive) }
            return ArchiveRetention.newestFirst(.init(path: a.archive, created: x), .init(path: b.archive, created: y))
        }
        if json {
            try Console.json(Document(directory: directory, archives: entries, durationSeconds: Output.durationSeconds))
            return
        }
        if entries.isEmpty {
            Console.note("no archives (*.nu11vlt) in '\(directory)'")
            return
        }
        Console.table([["ARCHIVE", "SIZE", "CREATED", "MODE", "KIND", "FREES", "SIGNED BY"] + (trust.isActive ? ["TRUSTED"] : [])] + entries.map { entry in
            let when = entry.ownerUid.map { "(uid \($0)'s file: not read)" }
                ?? entry.created.map { Timestamp.string($0, withFraction: false) } ?? "(unreadable header)"
            let signer = entry.signature == "invalid" ? "(signature fails)" : entry.signedBy ?? "-"
            let missing = entry.missingDependencies?.count ?? 0
            let kind = entry.dependsOn.map { $0.isEmpty ? "full" : "needs \($0.count)\(missing > 0 ? " (\(missing) MISSING)" : "")" } ?? "-"
            let frees = entry.freesBytes.map { $0 == 0 ? "0 (needed)" : Console.byteCount($0) } ?? "-"
            return [Self.name(entry.archive), Console.byteCount(entry.size), when, entry.mode ?? "-", kind, frees, signer]
                + (trust.isActive ? [entry.created == nil ? "-" : entry.notTrusted == nil ? "yes" : "NO"] : [])
        })
        for entry in entries { if let why = entry.notTrusted { Console.warning("\(Self.name(entry.archive)) is not trusted: \(why)") } }
        for entry in entries {
            guard let missing = entry.missingDependencies, !missing.isEmpty else { continue }
            Console.warning("\(Self.name(entry.archive)) needs \(missing.count) archive(s) that are not here (\(missing.map { String($0.prefix(8)) }.joined(separator: ", "))): "
                            + "a restore of it stops there; put them back beside it, or restore what is here with --salvage")
        }
    }

    /// The archive's own name, whether the path is a directory's or `REMOTE:DIR`'s.
    static func name(_ path: String) -> String { String(path.split(whereSeparator: { $0 == "/" || $0 == ":" }).last ?? "") }

    /// Archives by name: `*.nu11vlt`, not the temp names of uploads or writes in progress.
    static func isListed(_ name: String) -> Bool {
        name.hasSuffix(ArchiveRetention.nameSuffix) && !name.hasPrefix(AtomicFile.tempPrefix) && !name.hasPrefix(".")
    }
}
