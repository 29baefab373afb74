import Foundation
import N11System
import N11Vault

/// An archive on a remote, fetched into the spool while it is read (issue 29: a restore
/// from a remote no longer waits for the whole download before it starts). Two downloads
/// run at once: the archive's last `tailBytes` (the ZIP's central directory and, in version
/// 3, the root: what opening and unlocking read first) and the whole from its first byte, in
/// order, as a restore reads it. `file` lets readers wait for the bytes they ask for.
///
/// Reading this way keeps the all-or-nothing rule: whatever is read was written by the
/// download, every item is authenticated as it is read, and a reader calls `checkWhole()`
/// (`ArchiveReader`) before anything it restored becomes visible: the download must have
/// completed and the whole file must pass libzip's consistency checks.
public final class ArrivingArchive: @unchecked Sendable {
    /// How much of the end is fetched on its own: the central directory and root of an
    /// archive of a few million items. A larger end is read as the body arrives.
    public static let tailBytes: Int64 = 1 << 20

    public let file: ArrivingFile
    /// What messages call it: `REMOTE:PATH`.
    public let name: String
    private let downloads: [any StreamingDownload]
    private let done = DispatchGroup()
    private let remote: RemotePath
    private let rclone: any RemoteTransport

    private init(file: ArrivingFile, remote: RemotePath, downloads: [any StreamingDownload], rclone: any RemoteTransport) {
        self.file = file
        self.remote = remote
        name = remote.description
        self.downloads = downloads
        self.rclone = rclone
    }

    /// Starts fetching `remote` into a new 0600 file `local` (which the caller removes).
    /// `body` is its download from byte 0 to the end, started already (while the listing that
    /// gave `size` ran: one rclone start less to wait for); this adds one of the last
    /// `tailBytes`, which the body also brings, later.
    static func start(_ remote: RemotePath, size: Int64, body: any StreamingDownload, into local: String,
                      rclone: any RemoteTransport) throws(ArchiveError) -> ArrivingArchive {
        // Small archives come in one piece: a second rclone start would cost more than it saves.
        let tailStart = size > 2 * tailBytes ? size - tailBytes : size
        let writer: FileDescriptor
        let file: ArrivingFile
        do {
            writer = try FileDescriptor.createExclusive(local, mode: 0o600)
            file = try ArrivingFile(path: local, size: size, tailStart: tailStart)
        } catch {
            body.abandon()
            try? FileSystem.removeFile(local)
            throw ArchiveError.wrap(error)
        }
        var downloads = [body]
        if tailStart < size {
            do { downloads.append(try rclone.startStreamingDownload(of: remote, offset: tailStart, count: nil)) } catch {
                body.abandon()
                try? FileSystem.removeFile(local)
                throw error
            }
        }
        let archive = ArrivingArchive(file: file, remote: remote, downloads: downloads, rclone: rclone)
        archive.receive(body, at: 0, count: size, into: writer, remote: remote)
        if tailStart < size { archive.receive(downloads[1], at: tailStart, count: size - tailStart, into: writer, remote: remote) }
        return archive
    }

    /// Writes what `download` gives at `offset…` of the file on a thread of its own: exactly
    /// `count` bytes, or the download fails (an object that changed size meanwhile included).
    /// Both write the tail's bytes; they are the same bytes, unless the object changed between
    /// the two requests, which the whole file's check and the tags then find.
    private func receive(_ download: any StreamingDownload, at offset: Int64, count: Int64, into writer: FileDescriptor,
                         remote: RemotePath) {
        let file = self.file
        let isTail = offset > 0
        done.enter()
        Thread.detachNewThread { [done] in
            defer { done.leave() }
            var got: Int64 = 0
            do {
                while got < count {
                    let n = try download.receive(into: writer, at: offset + got, count: Int(min(1 << 20, count - got)))
                    if n == 0 { break }
                    got += Int64(n)
                    if !isTail { file.arrived(upTo: got) }
                }
                // Cut short: rclone's own reason first (a dropped link), if it gives one.
                if got < count { try download.finish() }
                guard got == count, try download.isAtEnd() else { throw Self.wrongSize(remote, count: count, isTail: isTail) }
                try download.finish()
                if isTail { file.tailArrived() } else { file.bodyArrived() }
            } catch {
                download.abandon()
                file.fail(error as? ArchiveError ?? ArchiveError.wrap(error))
            }
        }
    }

    private static func wrongSize(_ remote: RemotePath, count: Int64, isTail: Bool) -> ArchiveError {
        .remote(location: remote.description, why: "the download did not give the \(count) bytes the listing promised\(isTail ? " at its end" : ""): the archive changed there, or the transfer broke",
                kind: .ioFailure, hint: "run the command again")
    }

    /// Ends the downloads (a reader that stopped early) and waits for their threads.
    public func cancel() {
        for download in downloads { download.abandon() }
        done.wait()
    }

    /// Runs `body`, and if it throws after the download failed, throws the download's failure
    /// instead: a read that met the failure reports it through libzip as a bare I/O error.
    /// Damage is the transfer's when the copy differs from the remote object by the remote's
    /// own hash: `rclone cat` checks none (`copyto` did), so that is asked then.
    public func reportingItsFailure<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch {
            if let failure = file.failure { throw failure }
            if (error as? ArchiveError)?.kind == .damaged, let changed = changedOnTheWay() { throw changed }
            throw error
        }
    }

    /// Why the downloaded copy is not the remote object (the download's failure, or a hash of
    /// the remote's that differs); nil when it is, or when the remote keeps no hash to tell.
    private func changedOnTheWay() -> ArchiveError? {
        do { try file.waitUntilWhole() } catch { return error as? ArchiveError ?? ArchiveError.wrap(error) }
        guard let hashes = try? rclone.remoteHashes(remote, types: nil) else { return nil }
        for type in ["sha256", "sha1", "md5"] {
            guard let kept = hashes[type] else { continue }
            let local: String
            do {
                local = type == "sha256" ? try WrittenArchives.sha256(of: FileDescriptor.openForReading(file.path))
                    : try rclone.localHash(file.path, type: type)
            } catch { return nil }
            guard local != kept else { return nil }
            return .remote(location: remote.description,
                           why: "the downloaded copy differs from the archive on the remote (by its \(type)): it changed on the way, or was replaced meanwhile; nothing was restored",
                           kind: .ioFailure, hint: "run the command again")
        }
        return nil
    }
}
