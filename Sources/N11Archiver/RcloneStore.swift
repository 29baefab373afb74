import Foundation
import N11System
import N11Vault

/// A directory on an rclone remote (`REMOTE:DIR`). Objects are read from their first 64 KiB
/// (a header and its key entry) or fetched whole into the spool; nothing is read or written
/// in place (see `RemoteArchives`).
public final class RcloneStore: ArchiveStore {
    public let directory: RemotePath
    private let rclone: any RemoteTransport
    private let spoolOption: String?
    /// Where the spool is by default (nil: a store that is only listed, never fetched from).
    private let home: N11Home?

    public init(_ directory: RemotePath, spool: String?, home: N11Home?, rclone: any RemoteTransport = Rclone()) {
        self.directory = directory
        self.rclone = rclone
        self.spoolOption = spool
        self.home = home
    }

    public var location: String { directory.description }

    public func location(of name: String) -> String { directory.appending(name).description }

    public func list() throws(ArchiveError) -> [StoredObject] {
        // While this store publishes under its lock: the listing the lock just made.
        if let listedUnderLock { return listedUnderLock }
        let listed = try rclone.list(directory).map { StoredObject(name: $0.name, size: $0.size) }
        directoryListed = true
        return listed
    }

    /// Whether a listing showed the directory exists (the lock need not check again).
    private var directoryListed = false
    /// The directory as the publishing lock listed it, while `publishNew` holds that lock.
    private var listedUnderLock: [StoredObject]?

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

    /// Starts fetching object `name` into the spool, to be read as it arrives; nil when the
    /// listing does not show it (`fetch` then says what is wrong) or gives no size. The caller removes the
    /// file (`ArrivingArchive.file.path`) when it is done.
    public func startFetching(_ name: String) throws(ArchiveError) -> ArrivingArchive? {
        guard let home else { preconditionFailure("a store opened without a home is only listed") }
        let spool = try RemoteArchives.spool(spoolOption, home: home)
        let remote = directory.appending(name)
        // The download starts while the listing gives its size (both wait on a connection).
        let body = try rclone.startStreamingDownload(of: remote, offset: 0, count: nil)
        let object: RemoteObject?
        do { object = try rclone.list(directory).first { $0.name == name } } catch {
            body.abandon()
            throw error
        }
        // Not listed, or of a size the backend does not know (-1): fetched whole instead.
        guard let object, object.size >= 0 else {
            body.abandon()
            return nil
        }
        let local = Path.join(spool, AtomicFile.tempName(for: "download.nu11vlt"))
        return try ArrivingArchive.start(remote, size: object.size, body: body, into: local, rclone: rclone)
    }

    public func delete(_ object: StoredObject) throws(ArchiveError) {
        try rclone.delete(directory.appending(object.name))
    }

    public func finishDeleting() throws(ArchiveError) {}

    public func lock(exclusive: Bool, waitSeconds: Double) throws(ArchiveError) -> any ArchiveStoreLock {
        try RemoteLock.acquire(directory, exclusive: exclusive, waitSeconds: waitSeconds, rclone: rclone, directoryListed: directoryListed)
    }

    /// The temp objects of failed uploads (`.n11tmp-…`).
    public func removeLeftovers(dryRun: Bool) -> Int {
        guard let listed = try? rclone.list(directory) else { return 0 }
        if dryRun { return listed.filter { $0.name.hasPrefix(RemoteArchives.tempPrefix) }.count }
        return RemoteArchives.removeTemporaries(in: directory, listed: listed, rclone: rclone)
    }

    /// Made whole in the spool under a temp name of this process (a copy a killed run left
    /// is swept by the next one, and Ctrl-C takes it back at once) and uploaded under a temp
    /// name while it is written, where the backend takes a stream (`StreamedUpload`; else
    /// uploaded once it is complete), then checked and moved into place
    /// (`RemoteArchives.publish`). The spooled copy goes, unless `keepLocal` keeps it under the
    /// archive's name.
    public func publishNew(name: String?, at date: Date, _ options: PublishOptions,
                           make: (NewArchiveFile) throws -> ArchiveCreator.Report) throws -> Publication {
        guard let home else { preconditionFailure("a store opened without a home is only listed") }
        let spool = try RemoteArchives.spool(spoolOption, home: home)
        let lock = try RemoteLock.acquire(directory, exclusive: false, waitSeconds: options.lockWait, rclone: rclone,
                                          directoryListed: directoryListed)
        defer { lock.release() }
        // The free name from the listing the lock just made (one rclone start less); the
        // name is checked again right before the archive is moved into place.
        let final = directory.appending(try name ?? RemoteArchives.freeName(at: date, existing: Set(lock.listing.map(\.name)), in: location))
        let kept = Path.join(spool, final.name)
        if options.keepLocal, (try? FileStatus.of(kept)) != nil {
            throw ArchiveError.remote(location: kept, why: "a file of that name is in the spool already; nothing was written", kind: .outputExists,
                                      hint: "move it away (a kept copy of an earlier upload?), or give another --spool")
        }
        let local = Path.join(spool, AtomicFile.tempName(for: final.name))
        let cleanup = Interruption.onInterrupt { try? FileSystem.removeFile(local) }
        defer {
            try? FileSystem.removeFile(local)
            Interruption.cancel(cleanup)
        }
        listedUnderLock = lock.listing.map { StoredObject(name: $0.name, size: $0.size) }
        defer { listedUnderLock = nil }
        // Ctrl-C takes the streamed temp object back too (after the rclone child, whose own
        // cleanup is newer and runs first).
        let streamed = StreamedUpload(to: RemoteArchives.tempObject(for: final), transport: rclone)
        let streamCleanup = Interruption.onInterrupt { [rclone] in if streamed.hasStarted { rclone.deleteOnInterrupt(streamed.temp) } }
        defer { Interruption.cancel(streamCleanup) }
        let report: ArchiveCreator.Report
        do {
            report = try make(NewArchiveFile(path: local) { descriptor in
                streamed.attach(descriptor)
                return streamed
            })
        } catch {
            if streamed.abandon() { try? rclone.delete(streamed.temp) }
            throw error
        }
        let started = Date()
        let sending = streamed.isSending
        if sending { options.notice(.uploading(bytes: report.archiveBytes, to: final.description, whileWritten: true)) }
        let sent: RemoteArchives.SentUpload?
        switch streamed.finish(size: report.archiveBytes, progress: sending ? options.progress : nil) {
        case let .sent(hash, features):
            sent = .init(temp: streamed.temp, hash: hash, keptHashes: features.hashes)
        case let .notSent(why, begun):
            if begun {
                options.notice(.streamFailed(reason: why))
                try? rclone.delete(streamed.temp)
            }
            options.notice(.uploading(bytes: report.archiveBytes, to: final.description, whileWritten: false))
            sent = nil
        }
        let checkedBy = try RemoteArchives.publish(local, sha256: report.sha256, as: final, rclone: rclone, progress: options.progress,
                                                   sent: sent)
        let seconds = Date().timeIntervalSince(started)
        options.notice(.uploaded(seconds: seconds, checkedBy: checkedBy))
        // Published: keeping the copy must not fail the command, nor replace a file that
        // appeared under that name meanwhile.
        var keptCopy: String? = nil
        if options.keepLocal {
            do {
                let handle = try DirectoryHandle.open(spool, followingLink: true)
                try DirectoryHandle.rename(Path.lastComponent(of: local), in: handle, to: final.name, in: handle, .noReplace)
                keptCopy = kept
                options.notice(.keptLocal(path: kept))
            } catch {
                options.notice(.keepLocalFailed(path: kept, reason: "\(error)"))
            }
        }
        return Publication(report: report, location: final.description,
                           upload: .init(bytes: report.archiveBytes, checkedBy: checkedBy, seconds: (seconds * 1000).rounded() / 1000,
                                         keptLocal: keptCopy, whileWritten: sent != nil))
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
