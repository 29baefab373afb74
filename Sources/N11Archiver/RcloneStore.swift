import Foundation
import N11System
import N11Vault

/// A directory on an rclone remote (`REMOTE:DIR`). Objects are read from their first 64 KiB
/// (a header and its key entry) or fetched whole into the spool; nothing is read or written
/// in place (see `RemoteArchives`).
public final class RcloneStore: ArchiveStore {
    public let directory: RemotePath
    private let rclone: Rclone
    private let spoolOption: String?
    /// Where the spool is by default (nil: a store that is only listed, never fetched from).
    private let home: N11Home?

    public init(_ directory: RemotePath, spool: String?, home: N11Home?, rclone: Rclone = Rclone()) {
        self.directory = directory
        self.rclone = rclone
        self.spoolOption = spool
        self.home = home
    }

    public var location: String { directory.description }

    public func location(of name: String) -> String { directory.appending(name).description }

    public func list() throws(ArchiveError) -> [StoredObject] {
        try rclone.list(directory).map { StoredObject(name: $0.name, size: $0.size) }
    }

    public func keyEntries(of object: StoredObject) throws(ArchiveError) -> ArchiveKeyEntries? {
        ArchiveKeyEntries(prefix: try rclone.prefix(directory.appending(object.name), count: RemoteArchives.headerPrefixBytes),
                          name: location(of: object.name))
    }

    public func fetch(_ object: StoredObject, progress: ArchiveProgress?) throws(ArchiveError) -> FetchedArchive {
        guard let home else { preconditionFailure("a store opened without a home is only listed") }
        let spool = try RemoteArchives.spool(spoolOption, home: home)
        let local = try RemoteArchives.fetch(directory.appending(object.name), into: spool, rclone: rclone, progress: progress)
        return FetchedArchive(path: local, name: location(of: object.name), isCopy: true)
    }

    public func delete(_ object: StoredObject) throws(ArchiveError) {
        try rclone.delete(directory.appending(object.name))
    }

    public func finishDeleting() throws(ArchiveError) {}

    public func lock(exclusive: Bool, waitSeconds: Double) throws(ArchiveError) -> any ArchiveStoreLock {
        try RemoteLock.acquire(directory, exclusive: exclusive, waitSeconds: waitSeconds, rclone: rclone)
    }

    /// The temp objects of failed uploads (`.n11tmp-…`).
    public func removeLeftovers(dryRun: Bool) -> Int {
        guard let listed = try? rclone.list(directory) else { return 0 }
        if dryRun { return listed.filter { $0.name.hasPrefix(RemoteArchives.tempPrefix) }.count }
        return RemoteArchives.removeTemporaries(in: directory, listed: listed, rclone: rclone)
    }

    /// An upload this home published and recorded: the same place and size.
    public func recorded(_ object: StoredObject, in records: [WrittenArchives.Record]) -> WrittenArchives.Record? {
        records.first { $0.location == location(of: object.name) && $0.size == object.size }
    }

    /// Written when the record names this object with this size. An object has no owner on a
    /// remote, so one that claims the ID otherwise proves nothing either way (anyone who can
    /// write to the remote can copy a header): it is judged by its key slots.
    public func check(_ object: StoredObject, against record: WrittenArchives.Record, home: N11Home) throws(ArchiveError) -> RecordMatch {
        record.location == location(of: object.name) && record.size == object.size ? .written : .unproven
    }
}

extension RemoteLock: ArchiveStoreLock {}
