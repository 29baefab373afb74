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
          n11archive list nightly.nu11vlt --name 'IMG_*'
          n11archive list nightly.nu11vlt --json
        """)

    @OptionGroup var input: ArchiveInput
    @Flag(help: "Print one JSON document (also on failure).") var json = false
    @Option(name: .customLong("name"), help: ArgumentHelp("Only items whose name matches GLOB (quote it; repeatable).", valueName: "GLOB"))
    var names: [String] = []


    struct Listing: Encodable {
        let outcome = "ok", command = "list"
        let durationSeconds = Output.durationSeconds
        let archive: String
        let archiveId: String
        let formatVersion: Int
        let mode: String
        let created: Date
        let items: [Manifest.Item]
    }

    func run() throws {
        let (archive, _) = try input.unlock()
        let items = try archive.items.all().filter { item in names.isEmpty || names.contains { ItemSelection.nameMatches($0, item.name) } }
        if json {
            try Console.json(Listing(archive: input.file, archiveId: archive.header.archiveIDHex, formatVersion: archive.header.version,
                                     mode: archive.header.mode.rawValue,
                                     created: archive.header.created, items: items))
            return
        }
        ItemTable.print(items.map {
            .init(id: $0.id, kind: $0.kind.rawValue, compartment: $0.compartment.rawValue, size: $0.size,
                  created: $0.created, expires: $0.expires, name: $0.name)
        })
    }
}
