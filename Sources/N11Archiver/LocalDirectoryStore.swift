import Foundation
import Glibc
import N11System
import N11Vault

/// A local directory of archives (`create --output-dir DIR`, `prune DIR`). Only regular files
/// directly in it are objects (a link or a subdirectory is never read or deleted), and a file
/// of another user is listed as foreign: never read (DESIGN.md §3.8).
public final class LocalDirectoryStore: ArchiveStore {
    public let location: String

    /// `directory` must exist and be a directory; `forPrune` says in a message which role it
    /// has (create writes to it, prune deletes from it).
    public init(_ directory: String, forPrune: Bool) throws(ArchiveError) {
        let status = (try? FileStatus.of(directory, followLinks: true)) ?? nil
        guard status?.kind == .directory else {
            throw .noArchiveDirectory(path: directory, forPrune: forPrune, exists: status != nil)
        }
        location = directory
    }

    public func location(of name: String) -> String { Path.join(location, name) }

    public func list() throws(ArchiveError) -> [StoredObject] {
        let names: [String]
        do { names = try Directory.entries(of: location) } catch { throw .wrap(error) }
        return names.compactMap { name in
            guard let status = (try? FileStatus.of(location(of: name), followLinks: false)) ?? nil, status.kind == .regular else { return nil }
            return StoredObject(name: name, size: status.size, foreignOwner: status.isOwnedByCurrentUser ? nil : status.owner)
        }
    }

    /// Read through the whole ZIP's checks (`ArchiveReader`): a file whose directory is
    /// damaged is unreadable here, as it would be to a restore.
    public func keyEntries(of object: StoredObject) throws(ArchiveError) -> ArchiveKeyEntries? {
        try? ArchiveReader(path: location(of: object.name)).keyEntries
    }

    public func fetch(_ object: StoredObject, progress: ArchiveProgress?) throws(ArchiveError) -> FetchedArchive {
        FetchedArchive(path: location(of: object.name), name: location(of: object.name), isCopy: false)
    }

    public func delete(_ object: StoredObject) throws(ArchiveError) {
        let path = location(of: object.name)
        do { try FileSystem.removeFile(path) } catch { throw .system(SystemError("cannot delete", path: path, errno: error.errno)) }
    }

    public func finishDeleting() throws(ArchiveError) {
        do { try Directory.sync(location) } catch { throw .wrap(error) }
    }

    public func lock(exclusive: Bool, waitSeconds: Double) throws(ArchiveError) -> any ArchiveStoreLock {
        try DirectoryLock.acquire(location, exclusive: exclusive, waitSeconds: waitSeconds)
    }

    /// A write into a local directory leaves nothing that outlives its process but a hidden
    /// temp file, which the next write's `AtomicFile` clean-up removes: nothing to do here.
    public func removeLeftovers(dryRun: Bool) -> Int { 0 }

    /// Made in place: `make` writes the hidden temp file beside the final name and publishes
    /// it with `renameat2` without replacing (`ArchiveCreator`), so a name taken between
    /// the check here and the publish is still never overwritten (73).
    public func publishNew(name: String?, at date: Date, _ options: PublishOptions,
                           make: (NewArchiveFile) throws -> ArchiveCreator.Report) throws -> Publication {
        let lock = try self.lock(exclusive: false, waitSeconds: options.lockWait)
        defer { lock.release() }
        let path = try name.map { location(of: $0) } ?? freePath(at: date)
        let report = try make(NewArchiveFile(path: path))
        return Publication(report: report, location: Path.absolute(path), upload: nil)
    }

    /// The first free dated name for `date`: the bare timestamp, then -2, -3, ….
    private func freePath(at date: Date) throws(ArchiveError) -> String {
        for attempt in 1...1000 {
            let candidate = location(of: ArchiveRetention.fileName(for: date, attempt: attempt))
            do { if try FileStatus.of(candidate) == nil { return candidate } } catch { throw .wrap(error) }
        }
        throw .noFreeName(directory: location, name: ArchiveRetention.fileName(for: date))
    }

    /// A local file is always read: its header's archive ID picks the record (`check`).
    public func recorded(_ object: StoredObject, in records: [WrittenArchives.Record]) -> WrittenArchives.Record? { nil }

    /// The file at the recorded place with the recorded size, or a copy byte for byte the
    /// recorded SHA-256 (`WrittenArchives.checkAsWritten`). A file of the user's that claims
    /// the ID and is neither is a damaged archive of ours: thrown, so nothing is deleted.
    public func check(_ object: StoredObject, against record: WrittenArchives.Record, home: N11Home) throws(ArchiveError) -> RecordMatch {
        try WrittenArchives.checkAsWritten(location(of: object.name), record: record, in: home)
        return .written
    }
}

extension DirectoryLock: ArchiveStoreLock {}
