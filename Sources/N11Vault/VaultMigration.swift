import N11Crypto
import N11Format
import N11System

/// Version 1 of the vault layout kept each item's sealed record in a file of its own,
/// `Meta/{ID}.n11meta`. Readers still read such a vault as it is; the first writer moves the
/// records into the catalogue (`migrate`), crash-safely (FORMAT.md, Appendix A):
///
/// 1. the catalogue is built under a temp name, every record copied byte for byte (damaged
///    ones too: they stay reported, and removable, as before), and checkpointed whole;
/// 2. it is renamed to `Catalogue.sqlite`: the commit point;
/// 3. the record files are removed, and `Meta/` gives way to a small file of the same name
///    that tells an older n11archive, which would otherwise read an empty vault and lose
///    what it added, that it cannot use this vault (its listing fails on a file).
///
/// Killed before 2, the vault is still v1 and the temp file is a leftover; killed after, the
/// next writer finishes 3 (`finishMigration`).
enum MetaDirectory {
    static let name = "Meta"
    static let recordExtension = "n11meta"
    static let tombstoneText = """
        This vault's item records moved into Catalogue.sqlite when a newer n11archive \
        first wrote to it. This version of n11archive cannot read it: install the newer one.

        """

    static func path(in vaultPath: String) -> String { Path.join(vaultPath, name) }

    /// Whether the vault still keeps its records in `Meta/` (a directory, not the tombstone).
    static func exists(in vaultPath: String) -> Bool {
        ((try? FileStatus.of(path(in: vaultPath))) ?? nil)?.kind == .directory
    }

    static func recordPath(id: String, in vaultPath: String) -> String {
        Path.join(path(in: vaultPath), "\(id).\(recordExtension)")
    }

    /// The IDs that have a record file. Files are named by their item's canonical ID (upper-case
    /// UUID text); any other name is a stray file, passed over (a record under another spelling
    /// of its ID could never open: the ID is its associated data).
    static func recordIDs(in vaultPath: String) throws -> [String] {
        let suffix = "." + recordExtension
        return try Directory.entries(of: path(in: vaultPath), sorted: false).compactMap { name -> String? in
            guard name.hasSuffix(suffix) else { return nil }
            let id = String(name.dropLast(suffix.utf8.count))
            return EntryName.isCanonicalID(id) ? id : nil
        }
    }

    /// One record file's bytes; nil if it cannot be read (then the item is reported damaged).
    static func record(id: String, in vaultPath: String) -> [UInt8]? {
        try? FileDescriptor.openForReading(recordPath(id: id, in: vaultPath)).readAll(limit: 64 << 10)
    }

    /// Steps 1 and 2: called by a writer (vault lock held) once interrupted v1 commits have
    /// been finished. A record file that cannot be read stops the migration, and the vault
    /// stays v1: copying it as missing would lose the item.
    static func migrate(vaultPath: String) throws {
        let temp = Path.join(vaultPath, AtomicFile.tempName(for: VaultCatalogue.fileName))
        do {
            do {   // the connection is closed at the end of this scope, before the rename
                let catalogue = try VaultCatalogue.create(at: temp)
                try catalogue.beginChange()
                for id in try recordIDs(in: vaultPath).sorted() {
                    let bytes = try FileDescriptor.openForReading(recordPath(id: id, in: vaultPath)).readAll(limit: 64 << 10)
                    try catalogue.put(id: id, record: bytes)
                }
                // Step 3 as the catalogue's first pending step: whoever opens the vault for
                // writing next (this process, right after the rename) carries it out, and
                // again after a crash in the middle of it.
                try catalogue.addPending(VaultStaging.Operation.finishMigration.line)
                try catalogue.commitChange()
                try catalogue.checkpoint()
            }
            try FileSystem.move(temp, to: Path.join(vaultPath, VaultCatalogue.fileName), missingIsDone: false)
            try Directory.sync(vaultPath)
        } catch {
            VaultCatalogue.removeFiles(at: temp)
            throw error
        }
    }

    /// Step 3, once the catalogue is in place: the record files go (they are in the catalogue),
    /// stray files in `Meta/` stay (never ours to remove) and keep the directory.
    /// Idempotent: a crash after the directory went and before the `Meta` file was written
    /// leaves neither, and running it again writes the file.
    static func finishMigration(vaultPath: String) throws {
        let directory = path(in: vaultPath)
        if exists(in: vaultPath) {
            for id in try recordIDs(in: vaultPath) { try FileSystem.removeFile(recordPath(id: id, in: vaultPath)) }
            AtomicFile.removeLeftovers(in: directory)
            guard (try? FileSystem.removeEmptyDirectory(directory)) != nil else { return }
        }
        guard try FileStatus.of(directory) == nil else { return }
        try AtomicFile.write(Array(tombstoneText.utf8), to: directory, replaceExisting: false)
    }
}
