import Foundation
import N11Crypto
import N11Format
import N11System
import N11Vault

/// What this home wrote: each archive's size and SHA-256, recorded by `create` in
/// `HOME/written/{archiveId}.json` (0600 in a 0700 directory). A machine that makes
/// archives for recipients cannot open them, yet `verify --as-written` and `prune` can still
/// tell that an archive is byte for byte what it wrote (no bit rot, no truncation, no swap)
/// before deleting older ones.
public enum WrittenArchives {
    public struct Record: Sendable, Equatable {
        public let archiveID: String
        public let size: Int64
        public let sha256: String
        public let created: Date
        /// Where it was published: an absolute path, or `REMOTE:PATH` (records made by older
        /// versions may hold a relative path, or none).
        public var location: String? = nil

        /// Whether the local file `path` is the one published at the recorded place: the same
        /// file, however either path spells it (a link, `./`, another working directory).
        public func isAt(_ path: String) -> Bool {
            guard let location else { return false }
            if location == path || Path.absolute(location) == Path.absolute(path) { return true }
            guard RemotePath.parse(location) == nil,
                  let recorded = (try? FileStatus.of(location, followLinks: true)) ?? nil,
                  let here = (try? FileStatus.of(path, followLinks: true)) ?? nil else { return false }
            return recorded.identity == here.identity
        }
    }

    static func directory(_ home: N11Home) -> String { Path.join(home.root, "written") }

    static func path(_ home: N11Home, archiveID: String) -> String {
        Path.join(directory(home), archiveID + ".json")
    }

    /// Records an archive just created. A failure here fails the command: an archive whose
    /// record is missing would make the next prune refuse.
    public static func record(_ report: ArchiveCreator.Report, created: Date, location: String? = nil,
                              in home: N11Home) throws(ArchiveError) {
        try record(Record(archiveID: report.archiveID, size: report.archiveBytes, sha256: report.sha256, created: created,
                          location: location ?? Path.absolute(report.path)), in: home)
    }

    /// Every record of this home.
    public static func all(in home: N11Home) -> [Record] {
        guard let names = try? Directory.entries(of: directory(home)) else { return [] }
        return names.filter { $0.hasSuffix(".json") }.compactMap { try? lookup(String($0.dropLast(5)), in: home) }
    }

    static func record(_ record: Record, in home: N11Home) throws(ArchiveError) {
        do {
            _ = try Directory.ensure(directory(home), mode: 0o700)
            try PrivatePermissions.checkDirectory(directory(home))
            var writer = JSONWriter()
            writer.object { w in
                w.key("archiveId"); w.string(record.archiveID)
                w.key("created"); w.timestamp(Date(timeIntervalSince1970: record.created.timeIntervalSince1970.rounded(.down)))
                if let location = record.location { w.key("location"); w.string(location) }
                w.key("sha256"); w.string(record.sha256)
                w.key("size"); w.integer(record.size)
            }
            try AtomicFile.write(writer.bytes, to: path(home, archiveID: record.archiveID), mode: 0o600)
        } catch { throw ArchiveError.wrap(error) }
    }

    /// Records an archive that was just verified in full as written by this home (`verify
    /// --adopt`): what a home made anew after a disaster says of its old archives, so that
    /// `prune` here counts them again. `reader.path` is the file verified (for a remote
    /// archive the fetched copy, whose bytes are the remote's); `location` where it lives.
    ///
    /// Returns nil when this home already holds a record of the archive (its own, or one
    /// adopted before): that record, and the copy it names, stay as they are. A header dated
    /// in the future is refused: adopted, it would stay the newest archive forever.
    /// `verifiedAs` is the file's status when its verification began: a file that changed
    /// since is not recorded.
    public static func adopt(_ reader: ArchiveReader, location: String, verifiedAs before: FileStatus,
                             in home: N11Home, now: Date = Date()) throws(ArchiveError) -> Record? {
        guard try lookup(reader.header.archiveIDHex, in: home) == nil else { return nil }
        guard reader.header.created <= now.addingTimeInterval(300) else {
            throw .damaged(archive: reader.name, what: "its header is dated \(reader.header.created), in the future; it was not adopted")
        }
        do {
            let fd = try FileDescriptor.openForReading(reader.path)
            let digest = try sha256(of: fd)
            let after = try fd.status()
            guard after.identity == before.identity, after.size == before.size, after.modifiedSeconds == before.modifiedSeconds else {
                throw ArchiveError.damaged(archive: reader.name, what: "it changed while it was verified; it was not adopted")
            }
            let adopted = Record(archiveID: reader.header.archiveIDHex, size: after.size, sha256: digest, created: reader.header.created,
                                 location: RemotePath.parse(location)?.description ?? Path.absolute(location))
            try record(adopted, in: home)
            return adopted
        } catch { throw ArchiveError.wrap(error) }
    }

    /// This home's record of the archive at `path` when that file is the archive recorded: at
    /// the recorded place (when the record names a local one) and with the recorded size and
    /// SHA-256. A copy elsewhere, or a file changed since, is not: rekeying it must leave the
    /// record alone, or the original would look damaged to `prune` and `verify --as-written`.
    public static func record(describing path: String, in home: N11Home) throws(ArchiveError) -> Record? {
        let reader = try ArchiveReader(path: path)
        guard let recorded = try lookup(reader.header.archiveIDHex, in: home) else { return nil }
        if let location = recorded.location, !ArchiveStores.isRemote(location), location != Path.absolute(path) { return nil }
        do {
            let fd = try FileDescriptor.openForReading(path)
            guard try fd.status().size == recorded.size, try sha256(of: fd) == recorded.sha256 else { return nil }
        } catch { throw ArchiveError.wrap(error) }
        return recorded
    }

    /// After `rekey` replaced the archive `old` describes (see `record(describing:)`), records
    /// its new size and SHA-256 (the archive ID stays).
    public static func rerecord(_ path: String, replacing old: Record, in home: N11Home) throws(ArchiveError) {
        do {
            let fd = try FileDescriptor.openForReading(path)
            try record(Record(archiveID: old.archiveID, size: try fd.status().size, sha256: try sha256(of: fd), created: old.created,
                              location: old.location), in: home)
        } catch { throw ArchiveError.wrap(error) }
    }

    /// The record of the archive with this ID, if this home wrote it.
    public static func lookup(_ archiveID: String, in home: N11Home) throws(ArchiveError) -> Record? {
        let file = path(home, archiveID: archiveID)
        do {
            guard try FileStatus.of(file) != nil else { return nil }
            try PrivatePermissions.checkFile(file)
            let bytes = try FileDescriptor.openForReading(file).readAll(limit: 4096)
            return try JSONReader.read(bytes) { reader in
                var id: String?, size: Int64?, sha: String?, created: Date?, location: String?
                try reader.object { key, reader in
                    switch key {
                    case "location": try reader.fill(&location, try reader.string())
                    case "archiveId": try reader.fill(&id, try reader.string())
                    case "size": try reader.fill(&size, try reader.integer(Int64.self))
                    case "sha256": try reader.fill(&sha, try reader.string())
                    case "created": try reader.fill(&created, try reader.timestamp())
                    default: try reader.skip()
                    }
                }
                return Record(archiveID: try reader.required(id, "archiveId"), size: try reader.required(size, "size"),
                              sha256: try reader.required(sha, "sha256"), created: try reader.required(created, "created"),
                              location: location)
            }
        } catch let failure as JSONReader.Failure {
            throw .damaged(archive: file, what: "the record of a written archive does not parse: \(failure)")
        } catch { throw ArchiveError.wrap(error) }
    }

    /// Checks that `path`, a file of the user's whose header names `record`'s archive, is the
    /// archive this home wrote: the file at the recorded place with the recorded size (only
    /// the user can have changed it, and `prune` checks the newest byte for byte before it
    /// deletes anything), or a file elsewhere (a copy, a renamed or moved archive, a record
    /// of an older version without a place) whose size and SHA-256 are the record's; that
    /// place is then recorded, so the next prune does not hash it again. Anything else is a
    /// damaged copy of an archive of ours: thrown, so that a prune stops rather than passing
    /// over what may be the newest backup.
    public static func checkAsWritten(_ path: String, record: Record, in home: N11Home) throws(ArchiveError) {
        do {
            let fd = try FileDescriptor.openForReading(path)
            let size = try fd.status().size
            guard size == record.size else {
                throw ArchiveError.damaged(archive: path, what: "it is \(size) bytes; this machine wrote archive \(record.archiveID) with \(record.size)")
            }
            if record.isAt(path) { return }
            guard try sha256(of: fd) == record.sha256 else {
                throw ArchiveError.damaged(archive: path, what: "its SHA-256 differs from the one recorded when this machine wrote archive \(record.archiveID)")
            }
            var moved = record
            moved.location = Path.absolute(path)
            let original = (try? FileStatus.of(record.location ?? "", followLinks: true)) ?? nil
            if original == nil { try? Self.record(moved, in: home) }
        } catch { throw ArchiveError.wrap(error) }
    }

    /// Checks that `path` is byte for byte the archive this home wrote under its header's ID.
    /// Returns the record; throws `notWrittenHere` if there is none, `damaged` if the size or
    /// SHA-256 differ.
    @discardableResult
    public static func check(_ path: String, name: String? = nil, in home: N11Home) throws(ArchiveError) -> Record {
        let reader = try ArchiveReader(path: path, name: name)
        let path = path, shown = reader.name
        guard let record = try lookup(reader.header.archiveIDHex, in: home) else {
            throw .notWrittenHere(archive: shown, archiveID: reader.header.archiveIDHex)
        }
        do {
            let fd = try FileDescriptor.openForReading(path)
            let size = try fd.status().size
            guard size == record.size else {
                throw ArchiveError.damaged(archive: shown, what: "it is \(size) bytes; this machine wrote \(record.size)")
            }
            guard try sha256(of: fd) == record.sha256 else {
                throw ArchiveError.damaged(archive: shown, what: "its SHA-256 differs from the one recorded when this machine wrote it")
            }
            return record
        } catch { throw ArchiveError.wrap(error) }
    }

    /// SHA-256 of a whole file, as hex (pread from offset 0; the descriptor's offset is not used).
    static func sha256(of fd: FileDescriptor) throws -> String {
        let digest = try SHA256Digest()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var position: Int64 = 0
        while true {
            let n = try fd.read(into: &buffer, count: buffer.count, at: position)
            if n == 0 { break }
            digest.update(buffer[0..<n])
            position += Int64(n)
        }
        return try digest.finish().hex
    }
}
