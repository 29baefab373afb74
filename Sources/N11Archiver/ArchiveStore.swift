import Foundation
import N11System
import N11Vault

/// Where dated archives live: a local directory or a directory on an rclone remote (as
/// restic's `Backend` and kopia's `blob.Storage`). Retention, listing and locking are written
/// once against this (`ArchivePruner`, the `archives` listing); the two stores differ only in
/// how they reach the bytes. A location is parsed into a store once (`ArchiveStores.open`).
public protocol ArchiveStore: AnyObject {
    /// What messages call the store: the directory's path, or `REMOTE:DIR`.
    var location: String { get }
    /// What messages and this home's records call an object of it: a path, or `REMOTE:PATH`.
    func location(of name: String) -> String
    /// Every object directly in the store (not below).
    func list() throws(ArchiveError) -> [StoredObject]
    /// The object's header and key entries, read without its items and not authenticated;
    /// nil when it does not read as an archive. Only for objects `list` gave as readable.
    func keyEntries(of object: StoredObject) throws(ArchiveError) -> ArchiveKeyEntries?
    /// A local file holding the object's bytes, to read as any archive; `release` it after.
    func fetch(_ object: StoredObject, progress: ArchiveProgress?) throws(ArchiveError) -> FetchedArchive
    /// Deletes one object.
    func delete(_ object: StoredObject) throws(ArchiveError)
    /// Makes the deletions so far durable (a directory sync; nothing on a remote).
    func finishDeleting() throws(ArchiveError)
    /// Takes the store's lock: shared while an archive is written into it, exclusive while
    /// it is pruned. Held until `release()`.
    func lock(exclusive: Bool, waitSeconds: Double) throws(ArchiveError) -> any ArchiveStoreLock
    /// Removes (or with `dryRun` counts) what failed writes left behind. Only under the
    /// exclusive lock, when no write can be running.
    func removeLeftovers(dryRun: Bool) -> Int
    /// The record that names `object` by its place and size, when that alone shows this home
    /// wrote it (so its header need not be fetched); nil where a file must be read to tell.
    func recorded(_ object: StoredObject, in records: [WrittenArchives.Record]) -> WrittenArchives.Record?
    /// Writes a new archive into the store under the store's shared lock (so a prune of it
    /// waits): under `name`, or the first free dated name for `date` (`create --output-dir`).
    /// `make` writes the archive where `NewArchiveFile` says (in the directory itself, or in
    /// the spool for a remote) and returns its report; the store publishes it there without
    /// ever replacing an archive.
    func publishNew(name: String?, at date: Date, _ options: PublishOptions,
                    make: (NewArchiveFile) throws -> ArchiveCreator.Report) throws -> Publication
    /// How this home's record of writing an archive applies to `object`, which claims the
    /// record's archive ID in its header.
    func check(_ object: StoredObject, against record: WrittenArchives.Record, home: N11Home) throws(ArchiveError) -> RecordMatch
}

/// Where a store has a new archive made, and who reads it while it is written.
public struct NewArchiveFile {
    /// The local path to write it at.
    public let path: String
    /// Made from the file's descriptor when libzip starts writing, and told how far the file
    /// is final (`ArchiveCreator.Request.follower`): a remote streams the upload this way.
    let follower: ((FileDescriptor) -> any FinalPrefixObserver)?

    public init(path: String) {
        self.path = path
        follower = nil
    }

    init(path: String, follower: ((FileDescriptor) -> any FinalPrefixObserver)?) {
        self.path = path
        self.follower = follower
    }
}

/// One object of a store, as its listing gives it.
public struct StoredObject: Sendable, Equatable {
    public let name: String
    public let size: Int64
    /// The uid of another user who owns it (a local file): never read, counted or deleted
    /// (DESIGN.md §3.8). nil for the user's own files and for remote objects.
    public let foreignOwner: UInt32?

    public init(name: String, size: Int64, foreignOwner: UInt32? = nil) {
        self.name = name
        self.size = size
        self.foreignOwner = foreignOwner
    }
}

/// What a record of writing says of an object that claims its archive ID.
public enum RecordMatch: Sendable, Equatable {
    /// It is the archive this home wrote (its time is the record's).
    case written
    /// It is not shown to be: judged like any unrecorded archive (by its key slots).
    case unproven
}

/// How a new archive is published, and what to tell the user on the way.
public struct PublishOptions {
    /// Wait up to this long for the store's lock.
    public let lockWait: Double
    /// A remote: keep the spooled copy under the archive's name once it is published.
    public let keepLocal: Bool
    public let progress: ArchiveProgress?
    public let notice: (PublishNotice) -> Void

    public init(lockWait: Double, keepLocal: Bool = false, progress: ArchiveProgress? = nil,
                notice: @escaping (PublishNotice) -> Void = { _ in }) {
        self.lockWait = lockWait
        self.keepLocal = keepLocal
        self.progress = progress
        self.notice = notice
    }
}

public enum PublishNotice {
    /// The upload's last part (`whileWritten`: it began with the archive, and what is left
    /// goes up now), or the whole of it.
    case uploading(bytes: Int64, to: String, whileWritten: Bool)
    /// The upload that followed the archive failed; the archive is uploaded whole instead.
    case streamFailed(reason: String)
    /// How the upload was checked: `sha256`, `sha1`, `md5` (the remote's hash) or `read-back`.
    case uploaded(seconds: Double, checkedBy: String)
    case keptLocal(path: String)
    case keepLocalFailed(path: String, reason: String)
}

/// A new archive in a store.
public struct Publication {
    public let report: ArchiveCreator.Report
    /// Where it is, as messages and this home's records name it.
    public let location: String
    /// For a remote: how it was uploaded.
    public let upload: Upload?

    public struct Upload: Sendable {
        public let bytes: Int64
        public let checkedBy: String
        public let seconds: Double
        public let keptLocal: String?
        /// Sent while the archive was written (`seconds` is then what the upload took after it).
        public let whileWritten: Bool

        public init(bytes: Int64, checkedBy: String, seconds: Double, keptLocal: String?, whileWritten: Bool = false) {
            self.bytes = bytes
            self.checkedBy = checkedBy
            self.seconds = seconds
            self.keptLocal = keptLocal
            self.whileWritten = whileWritten
        }
    }

    public init(report: ArchiveCreator.Report, location: String, upload: Upload?) {
        self.report = report
        self.location = location
        self.upload = upload
    }
}

/// A store's lock, held until released (or the process ends).
public protocol ArchiveStoreLock: AnyObject {
    func release()
}

/// An object's bytes in a local file: the file itself, or a copy fetched into the spool
/// that `release` removes.
public final class FetchedArchive {
    public let path: String
    /// What messages call it (the store's location of the object).
    public let name: String
    /// Whether `path` is a fetched copy (removed on `release`), not the archive itself.
    public private(set) var isCopy: Bool

    public init(path: String, name: String, isCopy: Bool) {
        self.path = path
        self.name = name
        self.isCopy = isCopy
    }

    deinit { release() }

    /// Removes a fetched copy (nothing for a local file). Safe to call twice.
    public func release() {
        if isCopy { try? FileSystem.removeFile(path) }
        isCopy = false
    }

    /// Hands the fetched copy's removal to the caller (who removes it when the command ends,
    /// or on Ctrl-C): returns its path, and this no longer removes it.
    public func handOver() -> String {
        isCopy = false
        return path
    }
}

/// The stores a location names.
public enum ArchiveStores {
    /// Whether `location` names a place on an rclone remote (`REMOTE:PATH`).
    public static func isRemote(_ location: String) -> Bool { RemotePath.parse(location) != nil }

    /// A remote location that names a directory (`REMOTE:DIR/`, `REMOTE:`) where a file is
    /// wanted (`-o`), as the file it could have meant (`REMOTE:DIR/name`); nil for anything
    /// else. Taken as a file, `REMOTE:DIR/` would be DIR/DIR (`RemotePath.name` of `DIR/`).
    public static func remoteDirectory(_ location: String, suggesting name: String) -> String? {
        guard let remote = RemotePath.parse(location), remote.path.isEmpty || remote.path.hasSuffix("/") else { return nil }
        return remote.appending(name).description
    }

    /// For one archive's place on a remote (`-o REMOTE:FILE`): the store of its directory and
    /// its name there; nil for a local path.
    public static func remoteFile(_ location: String, spool: String?, home: N11Home) -> (store: any ArchiveStore, name: String)? {
        guard let remote = RemotePath.parse(location) else { return nil }
        return (RcloneStore(remote.parent, spool: spool, home: home), remote.name)
    }

    /// One archive to read: `location` itself, or for `REMOTE:PATH` a copy fetched into the
    /// spool (0600), named as the remote one in messages. `willFetch` is told before a
    /// download starts.
    public static func fetchArchive(_ location: String, spool: String?, home: N11Home, progress: ArchiveProgress?,
                                    willFetch: () -> Void = {}) throws(ArchiveError) -> FetchedArchive {
        guard let remote = RemotePath.parse(location) else { return FetchedArchive(path: location, name: location, isCopy: false) }
        willFetch()
        return try RcloneStore(remote.parent, spool: spool, home: home).fetch(StoredObject(name: remote.name, size: 0), progress: progress)
    }

    /// For `REMOTE:PATH`: the archive's download started into the spool, to be read as it
    /// arrives (`ArrivingArchive`; the caller removes its file). nil for a local path, and for
    /// a remote one the listing does not show (`fetchArchive` then reports why).
    public static func startFetching(_ location: String, spool: String?, home: N11Home,
                                     rclone: any RemoteTransport = Rclone()) throws(ArchiveError) -> ArrivingArchive? {
        guard let remote = RemotePath.parse(location) else { return nil }
        return try RcloneStore(remote.parent, spool: spool, home: home, rclone: rclone).startFetching(remote.name)
    }

    /// `REMOTE:DIR` is a directory on an rclone remote (fetched through `spool`), anything else
    /// a local directory, which must exist: a mistyped path in a timer unit should fail, not
    /// quietly start a new backup directory. `forPrune` says in messages which role it has.
    /// Without a `home` the store can be listed but not fetched from; with one, a remote's
    /// spool is checked now (a bad `--spool` fails before anything is done).
    public static func open(_ location: String, spool: String?, home: N11Home?, forPrune: Bool) throws(ArchiveError) -> any ArchiveStore {
        if let remote = RemotePath.parse(location) {
            if let home { _ = try RemoteArchives.spool(spool, home: home) }
            return RcloneStore(remote, spool: spool, home: home)
        }
        return try LocalDirectoryStore(location, forPrune: forPrune)
    }

}
