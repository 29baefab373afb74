import Foundation
import N11Archiver
import N11System

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
        for path in paths { _ = unlink(path) }
        paths = []
    }

    /// Removes one fetched copy now (a command reading several remote archives must not hold
    /// a full copy of each until it ends).
    static func remove(_ path: String) {
        guard let index = paths.firstIndex(of: path) else { return }
        _ = unlink(path)
        paths.remove(at: index)
    }
}

extension ArchiveInput {
    /// Lets go of `reader`'s fetched copy, if `file` is on a remote.
    func releaseFetchedCopy(of reader: ArchiveReader) {
        if RemotePath.parse(file) != nil { SpoolFiles.remove(reader.path) }
    }

    /// The archive to read: `file` itself, or, for `REMOTE:PATH`, a copy fetched into the
    /// spool (0600, removed when the command ends) and named as the remote one in messages.
    /// With `salvaging`, a damaged ZIP directory is read past (`ArchiveReader.init`).
    func reader(progress: ArchiveProgress? = nil, salvaging: Bool = false) throws -> ArchiveReader {
        guard let remote = RemotePath.parse(file) else { return try ArchiveReader(path: file, salvaging: salvaging) }
        let spoolDirectory = try RemoteArchives.spool(spool, home: store.resolvedHome)
        Console.note("fetching \(file)…")
        let local = try RemoteArchives.fetch(remote, into: spoolDirectory, progress: progress)
        SpoolFiles.removeAtExit(local)
        return try ArchiveReader(path: local, name: file, salvaging: salvaging)
    }
}
