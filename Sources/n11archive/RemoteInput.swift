import Foundation
import N11Archiver
import N11System
import N11Vault

/// Files this process fetched into the spool, removed when it exits (normally or through
/// `fail`). A process killed meanwhile leaves them to the next spool sweep
/// (`AtomicFile.removeLeftovers`: temp names carry the PID).
enum SpoolFiles {
    nonisolated(unsafe) private static var paths: [String] = []
    nonisolated(unsafe) private static var registered = false

    static func removeAtExit(_ path: String) {
        paths.append(path)
        guard !registered else { return }
        registered = true
        atexit { SpoolFiles.removeAll() }
        Interruption.onInterrupt { SpoolFiles.removeAll() }
    }

    static func removeAll() {
        for path in paths { try? FileSystem.removeFile(path) }
        paths = []
    }

    /// Removes one fetched copy now (a command reading several remote archives must not hold
    /// a full copy of each until it ends).
    static func remove(_ path: String) {
        guard let index = paths.firstIndex(of: path) else { return }
        try? FileSystem.removeFile(path)
        paths.remove(at: index)
    }
}

extension ArchiveInput {
    /// Lets go of `reader`'s fetched copy, if it is one.
    func releaseFetchedCopy(of reader: ArchiveReader) {
        SpoolFiles.remove(reader.path)
    }

    /// The archive to read: `file` itself, or, for `REMOTE:PATH`, a copy fetched into the
    /// spool (0600, removed when the command ends) and named as the remote one in messages.
    /// With `salvaging`, a damaged ZIP directory is read past (`ArchiveReader.init`).
    func reader(progress: ArchiveProgress? = nil, salvaging: Bool = false) throws -> ArchiveReader {
        let fetched = try SpoolFiles.fetch(file, spool: spool, home: store.resolvedHome, progress: progress)
        return try ArchiveReader(path: fetched.path, name: fetched.name, salvaging: salvaging)
    }
}

extension ArchiveInput {
    /// For a restore or a verify: a remote archive is read while it downloads
    /// (`ArrivingArchive`), except in a salvage (which walks the local headers of the whole
    /// file); else `reader` (a local file, or a remote one the listing gives no size for). Run
    /// what reads it through `ArrivingArchive.reportingItsFailure`, and `cancel` it after.
    func readerAsItArrives(salvaging: Bool, progress: ArchiveProgress?) throws -> (ArchiveReader, ArrivingArchive?) {
        guard !salvaging, let arriving = try ArchiveStores.startFetching(file, spool: spool, home: store.resolvedHome) else {
            return (try reader(progress: progress, salvaging: salvaging), nil)
        }
        SpoolFiles.removeAtExit(arriving.file.path)
        Console.note("fetching \(file) (read as it arrives)…")
        do { return (try arriving.reportingItsFailure { try ArchiveReader(arriving: arriving) }, arriving) } catch {
            arriving.cancel()
            throw error
        }
    }
}

extension SpoolFiles {
    /// `ArchiveStores.fetchArchive`, saying so when it downloads; a fetched copy is removed
    /// when the command ends (or on Ctrl-C), or earlier by `remove`.
    static func fetch(_ file: String, spool: String?, home: N11Home, progress: ArchiveProgress?) throws -> (path: String, name: String) {
        let fetched = try ArchiveStores.fetchArchive(file, spool: spool, home: home, progress: progress,
                                                     willFetch: { Console.note("fetching \(file)…") })
        if fetched.isCopy { removeAtExit(fetched.handOver()) }
        return (fetched.path, fetched.name)
    }
}
