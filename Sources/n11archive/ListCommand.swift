import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11Vault

struct ListArchive: ParsableCommand, ChoosesOutput {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the items an archive holds (needs its password or key).",
        discussion: """
        Examples:
          n11archive list vault.nu11vlt --password-file ~/.n11pass
          n11archive list nightly.nu11vlt --json
        """)

    @OptionGroup var input: ArchiveInput
    @Flag(help: "Print one JSON document (also on failure).") var json = false


    struct Listing: Encodable {
        let outcome = "ok", command = "list"
        let durationSeconds = Output.durationSeconds
        let archive: String
        let archiveId: String
        let mode: String
        let created: Date
        let items: [Manifest.Item]
    }

    func run() throws {
        let (archive, _) = try input.unlock()
        if json {
            try Console.json(Listing(archive: input.file, archiveId: archive.header.archiveIDHex, mode: archive.header.mode.rawValue,
                                     created: archive.header.created, items: archive.manifest.items))
            return
        }
        let formatter = ISO8601DateFormatter()
        for item in archive.manifest.items {
            Console.out([item.id, item.kind.rawValue, item.compartment.rawValue, Console.byteCount(item.size),
                         formatter.string(from: item.created), item.expires.map { "expires " + formatter.string(from: $0) } ?? "",
                         item.name].filter { !$0.isEmpty }.joined(separator: "  "))
        }
    }
}
