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


    func run() throws {
        let (archive, _) = try input.unlock()
        let items = archive.items
        let names = names
        let wanted = { (item: Manifest.Item) in names.isEmpty || names.contains { ItemSelection.nameMatches($0, item.name) } }
        if json {
            // Member by member, the items one at a time, as the archive gives them (issue 34).
            var document = Console.StreamedObject()
            try document.add("outcome", "ok")
            try document.add("command", "list")
            try document.add("durationSeconds", Output.durationSeconds)
            try document.add("archive", input.file)
            try document.add("archiveId", archive.header.archiveIDHex)
            try document.add("formatVersion", archive.header.version)
            try document.add("mode", archive.header.mode.rawValue)
            try document.add("created", archive.header.created)
            document.add("items", elements: { (body: (Manifest.Item) throws -> Void) in
                try items.forEach { _, item in if wanted(item) { try body(item) } }
            })
            try document.write()
            return
        }
        // The table takes rows in ID order: version 3's pages are; versions 1 and 2 hold
        // their manifest whole (bounded, FORMAT.md §8) and are sorted here.
        var table = ItemTable()
        func add(_ item: Manifest.Item) throws {
            guard wanted(item) else { return }
            try table.add(.init(id: item.id, kind: item.kind.rawValue, compartment: item.compartment.rawValue, size: item.size,
                                created: item.created, expires: item.expires, name: item.name))
        }
        if archive.header.version >= 3 { try items.forEach { try add($1) } }
        else { for item in try items.all().sorted(by: { $0.id < $1.id }) { try add(item) } }
        try table.print()
    }
}
