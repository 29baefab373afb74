import Foundation
import N11System
import N11Vault

/// An archive on a remote, fetched into the spool while it is read (issue 29: a restore
/// from a remote no longer waits for the whole download before it starts). Two downloads
/// run at once: the archive's last `tailBytes` (the ZIP's central directory and, in version
/// 3, the root: what opening and unlocking read first) and the rest from its first byte, in
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

    private init(file: ArrivingFile, name: String, downloads: [any StreamingDownload]) {
        self.file = file
        self.name = name
        self.downloads = downloads
    }

    /// Starts fetching `remote` into a new 0600 file `local` (which the caller removes).
    static func start(_ remote: RemotePath, size: Int64, into local: String, rclone: any RemoteTransport) throws(ArchiveError) -> ArrivingArchive {
        // Small archives come in one piece: a second rclone start would cost more than it saves.
        let tailStart = size > 2 * tailBytes ? size - tailBytes : size
        let writer: FileDescriptor
        let file: ArrivingFile
        do {
            writer = try FileDescriptor.createExclusive(local, mode: 0o600)
            file = try ArrivingFile(path: local, size: size, tailStart: tailStart)
        } catch {
            try? FileSystem.removeFile(local)
            throw ArchiveError.wrap(error)
        }
        var downloads: [any StreamingDownload] = []
        do {
            downloads.append(try rclone.startStreamingDownload(of: remote, offset: 0, count: tailStart))
            if tailStart < size { downloads.append(try rclone.startStreamingDownload(of: remote, offset: tailStart, count: nil)) }
        } catch {
            for download in downloads { download.abandon() }
            try? FileSystem.removeFile(local)
            throw error
        }
        let archive = ArrivingArchive(file: file, name: remote.description, downloads: downloads)
        archive.receive(downloads[0], at: 0, count: tailStart, into: writer, remote: remote) { file.arrived(upTo: $0) }
        if tailStart < size {
            archive.receive(downloads[1], at: tailStart, count: size - tailStart, into: writer, remote: remote) { _ in }
        }
        return archive
    }

    /// Writes what `download` gives at `offset…` of the file on a thread of its own: exactly
    /// `count` bytes, or the download fails (an object that changed size meanwhile included).
    private func receive(_ download: any StreamingDownload, at offset: Int64, count: Int64, into writer: FileDescriptor,
                         remote: RemotePath, progress: @escaping @Sendable (Int64) -> Void) {
        let file = self.file
        let isTail = offset > 0
        done.enter()
        Thread.detachNewThread { [done] in
            defer { done.leave() }
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var got: Int64 = 0
            do {
                while true {
                    let n = try download.read(into: &buffer, count: buffer.count)
                    if n == 0 { break }
                    guard got + Int64(n) <= count else { throw Self.wrongSize(remote, count: count, isTail: isTail) }
                    try writer.write(buffer[0..<n], at: offset + got)
                    got += Int64(n)
                    progress(offset + got)
                }
                try download.finish()
                guard got == count else { throw Self.wrongSize(remote, count: count, isTail: isTail) }
                if isTail { file.tailArrived() } else { file.bodyArrived() }
            } catch {
                download.abandon()
                file.fail(error as? ArchiveError ?? ArchiveError.wrap(error))
            }
        }
    }

    private static func wrongSize(_ remote: RemotePath, count: Int64, isTail: Bool) -> ArchiveError {
        .remote(location: remote.description, why: "the download did not give the \(count) bytes the listing promised\(isTail ? " at its end" : ""): the archive changed or the transfer broke; nothing was restored",
                kind: .ioFailure, hint: "run the command again")
    }

    /// Ends the downloads (a reader that stopped early) and waits for their threads.
    public func cancel() {
        for download in downloads { download.abandon() }
        done.wait()
    }

    /// Runs `body`, and if it throws after the download failed, throws the download's failure
    /// instead: a read that met the failure reports it through libzip as a bare I/O error.
    public func reportingItsFailure<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch {
            if let failure = file.failure { throw failure }
            throw error
        }
    }
}
