import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11Vault

struct Info: ParsableCommand, ChoosesOutput {
    static let configuration = CommandConfiguration(
        abstract: "Show what can be known about an archive without any secret.",
        discussion: "Example:\n  n11archive info vault.nu11vlt")

    @Argument(help: ArgumentHelp("The archive.", valueName: "FILE")) var file: String
    @Flag(help: "Print one JSON document (also on failure).") var json = false


    struct Summary: Encodable {
        let outcome = "ok", command = "info"
        let durationSeconds = Output.durationSeconds
        let archive: String
        let formatVersion: Int
        let mode: String
        let archiveId: String
        let created: Date
        let kdf: ArchiveHeader.KDF?
        let entries: Int
        let items: Int
        /// The archive file's size; named as in `create`'s document, which reports the same.
        let archiveBytes: Int64
    }

    func run() throws {
        let reader = try ArchiveReader(path: file)
        let h = reader.header
        let summary = Summary(archive: file, formatVersion: 1, mode: h.mode.rawValue, archiveId: h.archiveIDHex, created: h.created,
                              kdf: h.kdf, entries: reader.itemEntryCount + EntryName.fixed.count, items: reader.itemEntryCount,
                              archiveBytes: reader.fileSize)
        if json { try Console.json(summary); return }
        Console.out("archive:  \(file)")
        Console.out("format:   n11archive version 1")
        Console.out("mode:     \(h.mode.rawValue)\(h.mode == .secure ? " (restorable only with the key store that made it)" : "")")
        Console.out("id:       \(h.archiveIDHex)")
        Console.out("created:  \(ISO8601DateFormatter().string(from: h.created))")
        if let kdf = h.kdf { Console.out("kdf:      Argon2id v\(kdf.version), \(kdf.opsLimit) passes, \(kdf.memoryKiB >> 10) MiB, parallelism \(kdf.parallelism)") }
        Console.out("items:    \(reader.itemEntryCount) (\(summary.entries) ZIP entries)")
        Console.out("size:     \(Console.byteCount(reader.fileSize))")
    }
}
