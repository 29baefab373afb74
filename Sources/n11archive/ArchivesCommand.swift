import ArgumentParser
import Foundation
import N11Archiver
import N11Format
import N11System

struct Archives: ParsableCommand, ChoosesOutput {
    static let configuration = CommandConfiguration(
        abstract: "List the archives in a directory or on a remote, with size, time and mode.",
        discussion: """
        Examples:
          n11archive archives ~/backups
          n11archive archives b2:my-bucket/n11 --json
        Lists the files named *.nu11vlt (dated by `create --output-dir` or not), newest \
        first by the time in their header, as prune orders them. Time and \
        mode come from each archive's header, which is read without any key and so not \
        authenticated (`verify` does that); on a remote only the first 64 KiB of each \
        archive are fetched.
        """)

    @Argument(help: ArgumentHelp("The directory: a path, or REMOTE:PATH on an rclone remote.", valueName: "DIR"), completion: .directory)
    var directory: String
    @Flag(help: "Print one JSON document (also on failure).") var json = false

    struct Entry: Encodable {
        let archive: String
        let size: Int64
        let created: Date?
        let mode: String?
        let formatVersion: Int?
    }

    struct Document: Encodable {
        let outcome = "ok", command = "archives"
        let directory: String
        let archives: [Entry]
        let durationSeconds: Double
    }

    func run() throws {
        var entries: [Entry] = []
        if let remote = RemotePath.parse(directory) {
            let rclone = Rclone()
            for object in try rclone.list(remote) where Self.isListed(object.name) {
                let path = remote.appending(object.name)
                let header = try RemoteArchives.peekHeader(path, rclone: rclone)
                entries.append(Entry(archive: path.description, size: object.size, created: header?.created,
                                     mode: header?.mode.rawValue, formatVersion: header?.version))
            }
        } else {
            let dir = try DatedArchive.existingDirectory(directory, forPrune: true)
            for name in try Directory.entries(of: dir) where Self.isListed(name) {
                let path = Path.join(dir, name)
                guard let status = try FileStatus.of(path), status.kind == .regular else { continue }
                let header = (try? ArchiveReader(path: path))?.header
                entries.append(Entry(archive: path, size: status.size, created: header?.created, mode: header?.mode.rawValue,
                                     formatVersion: header?.version))
            }
        }
        // Prune's order (header time, then the name's -N); an unreadable header last.
        entries.sort { a, b in
            guard let x = a.created, let y = b.created else { return a.created != nil || (b.created == nil && a.archive > b.archive) }
            return ArchiveRetention.newestFirst(.init(path: a.archive, created: x), .init(path: b.archive, created: y))
        }
        if json {
            try Console.json(Document(directory: directory, archives: entries, durationSeconds: Output.durationSeconds))
            return
        }
        for entry in entries {
            let name = entry.archive.split(separator: "/").last.map(String.init) ?? entry.archive
            let when = entry.created.map { Timestamp.string($0, withFraction: false) } ?? "(unreadable header)"
            Console.out("\(name)  \(Console.byteCount(entry.size))  \(when)  \(entry.mode ?? "-")")
        }
        if entries.isEmpty { Console.note("no archives (*.nu11vlt) in '\(directory)'") }
    }

    /// Archives by name: `*.nu11vlt`, not the temp names of uploads or writes in progress.
    static func isListed(_ name: String) -> Bool {
        name.hasSuffix(ArchiveRetention.nameSuffix) && !name.hasPrefix(AtomicFile.tempPrefix) && !name.hasPrefix(".")
    }
}
