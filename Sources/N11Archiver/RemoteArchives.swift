import Foundation
import N11Container
import N11Crypto
import N11Format
import N11System
import N11Vault

/// Archives on an rclone remote. Nothing is read or written there directly: an archive is
/// made and checked in a local spool directory, then published; one to be read is fetched
/// into the spool first and read there like any other.
///
/// Publishing: upload under a temp name (`.n11tmp-NAME.RANDOM`) in the target directory,
/// check the upload against the local SHA-256 (the remote's own SHA-256, SHA-1 or MD5
/// where the backend has one, compared with the same hash of the local file; else the
/// object read back), refuse if the final name exists, then move it to the final name.
/// A reader of the remote never sees a partial archive under a real name; a temp object
/// left by a failure is deleted by the next `prune` of that directory.
public enum RemoteArchives {
    public static let tempPrefix = ".n11tmp-"

    /// The spool: `explicit`, else `HOME/spool`; made 0700 and checked to be private.
    public static func spool(_ explicit: String?, home: N11Home) throws(ArchiveError) -> String {
        let directory = Path.absolute(explicit ?? Path.join(home.root, "spool"))
        do {
            _ = try Directory.ensure(directory, mode: 0o700)
            try PrivatePermissions.checkDirectory(directory)
            AtomicFile.removeLeftovers(in: directory)
        } catch let violation as PrivatePermissions.Violation {
            // Never "chmod 0700 /tmp": a shared directory must not be made private. A place
            // of the user's own is the fix.
            throw .remote(location: directory, why: "a spool must be a directory of yours that only you can use (0700), and this is not (\(violation.problem))",
                          kind: .configuration,
                          hint: "choose a private directory: mkdir -m 700 ~/n11spool and give --spool ~/n11spool, or leave --spool out (HOME/spool)")
        } catch { throw ArchiveError.wrap(error) }
        return directory
    }

    /// Downloads `remote` into a 0600 temp file in `spool` and returns its path; the caller
    /// removes it. A failed download leaves nothing.
    public static func fetch(_ remote: RemotePath, into spool: String, rclone: any RemoteTransport = Rclone(),
                             progress: ArchiveProgress? = nil) throws(ArchiveError) -> String {
        let local = Path.join(spool, AtomicFile.tempName(for: "download.nu11vlt"))
        do {
            // Made empty and private first: rclone then writes into a file only we can read.
            let fd = try FileDescriptor.createExclusive(local, mode: 0o600)
            try fd.close()
            let size = progress == nil ? 0 : (try rclone.list(remote.parent).first { $0.name == remote.name }?.size ?? 0)
            try rclone.download(remote, to: local, progress: progress, size: size)
            try FileSystem.setMode(local, 0o600)
            return local
        } catch {
            try? FileSystem.removeFile(local)
            throw ArchiveError.wrap(error)
        }
    }

    /// The temp object an upload of `final` goes to before it is checked and moved.
    static func tempObject(for final: RemotePath) -> RemotePath {
        final.parent.appending(tempPrefix + final.name + "." + Path.randomSuffix())
    }

    /// An upload already complete under its temp name (streamed while the archive was
    /// written), with the remote's kind of hash of what was sent where it keeps SHA-1 or MD5.
    struct SentUpload {
        let temp: RemotePath
        let hash: (type: String, hex: String)?
        /// The hashes the remote keeps (from rclone's account of the backend).
        let keptHashes: [String]
    }

    /// Publishes the local archive `local` (whose SHA-256 is `sha256`) as `final`: uploaded
    /// under a temp name, or already `sent` there. Returns how the upload was checked:
    /// `sha256`, `sha1` or `md5` (the remote's hash), or `read-back`.
    @discardableResult
    static func publish(_ local: String, sha256: String, as final: RemotePath, rclone: any RemoteTransport = Rclone(),
                        progress: ArchiveProgress? = nil, sent: SentUpload? = nil) throws(ArchiveError) -> String {
        let temp = sent?.temp ?? tempObject(for: final)
        // Ctrl-C or SIGTERM takes the temp object back (the running upload is ended first:
        // cleanups run newest first, and the rclone child registered its own). A streamed
        // upload's caller registered this already.
        let cleanup = sent == nil ? Interruption.onInterrupt { rclone.deleteOnInterrupt(temp) } : nil
        defer { if let cleanup { Interruption.cancel(cleanup) } }
        do {
            let size = (try? FileStatus.of(local))??.size ?? 0
            if sent == nil { try rclone.upload(local, to: temp, progress: progress, size: size) }
            let differs = ArchiveError.remote(location: final.description, why: "the uploaded copy differs from the archive that was sent; nothing was published",
                                              kind: .ioFailure, hint: "run the command again; if it keeps failing, check the remote")
            let (matches, checkedBy) = try uploaded(temp, matches: local, sha256: sha256, sent: sent, rclone: rclone)
            guard matches else { throw differs }
            // A SHA-1 or MD5 taken on the way vouches for what was sent; the listing's size
            // ties that to the archive's (the writer ensures all of it was sent).
            let listing = try rclone.list(final.parent)
            guard listing.first(where: { $0.name == temp.name })?.size == size else { throw differs }
            if listing.contains(where: { $0.name == final.name }) {
                throw ArchiveError.outputExists(path: final.description)
            }
            try rclone.move(temp, to: final)
            return checkedBy
        } catch {
            // Best effort: when the remote is unreachable, the next prune removes it.
            try? rclone.delete(temp)
            throw ArchiveError.wrap(error)
        }
    }

    /// Whether the object `temp` holds exactly the bytes of `local`. A streamed upload asks the
    /// remote only for the hash it took on the way (each kind may cost the remote a pass over
    /// the object), and reads back at once where the remote keeps none.
    static func uploaded(_ temp: RemotePath, matches local: String, sha256: String, sent: SentUpload?,
                         rclone: any RemoteTransport) throws(ArchiveError) -> (Bool, String) {
        let types: [String]? = sent.map { sent in
            sent.keptHashes.contains("sha256") ? ["sha256"] : sent.hash.map { [$0.type] } ?? []
        }
        let hashes = types == [] ? [:] : try rclone.remoteHashes(temp, types: types)
        if let hash = hashes["sha256"] { return (hash == sha256, "sha256") }
        for type in ["sha1", "md5"] {
            guard let hash = hashes[type] else { continue }
            if let taken = sent?.hash, taken.type == type { return (hash == taken.hex, type) }
            return (hash == (try rclone.localHash(local, type: type)), type)
        }
        return (try rclone.sha256ByReading(temp) == sha256, "read-back")
    }

    /// Deletes the temp objects of earlier, failed uploads in `directory`. Only under the
    /// directory's exclusive lock (`prune`), when no upload can be running.
    @discardableResult
    public static func removeTemporaries(in directory: RemotePath, listed: [RemoteObject], rclone: any RemoteTransport = Rclone()) -> Int {
        var removed = 0
        for object in listed where object.name.hasPrefix(tempPrefix) {
            if (try? rclone.delete(directory.appending(object.name))) != nil { removed += 1 }
        }
        return removed
    }

    /// How much of a remote archive holds its header and key entry: the header is at most
    /// 16 KiB (FORMAT.md §8), the key entry 60 bytes, each behind a local ZIP header.
    public static let headerPrefixBytes = 64 << 10

    /// The header of a remote archive from its first 64 KiB, without fetching the rest: nil
    /// if those bytes do not start with a stored `header.json` that parses. Not authenticated.
    public static func peekHeader(_ remote: RemotePath, rclone: any RemoteTransport = Rclone()) throws(ArchiveError) -> ArchiveHeader? {
        guard let entry = ZipPrefix.firstEntry(of: try rclone.prefix(remote, count: headerPrefixBytes)),
              entry.name == EntryName.header else { return nil }
        return try? ArchiveHeader(parsing: entry.data)
    }

    /// The first dated name for `date` that `existing` does not hold.
    public static func freeName(at date: Date, existing: Set<String>, in directory: String) throws(ArchiveError) -> String {
        for attempt in 1...1000 {
            let name = ArchiveRetention.fileName(for: date, attempt: attempt)
            if !existing.contains(name) { return name }
        }
        throw .noFreeName(directory: directory, name: ArchiveRetention.fileName(for: date))
    }
}
