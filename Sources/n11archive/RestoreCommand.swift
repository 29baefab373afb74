import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11Vault

struct Restore: ParsableCommand, HasOutputOptions {
    static let configuration = CommandConfiguration(
        abstract: "Restore an archive into a vault, or export its items as plain files.",
        discussion: """
        Examples:
          n11archive restore vault.nu11vlt          # into this home's vault
          n11archive restore vault.nu11vlt --vault ~/vault2 --dry-run
          n11archive restore vault.nu11vlt --export ~/photos   # plaintext files
          n11archive restore vault.nu11vlt 3F2A --name 'IMG_*' --export ~/photos
          n11archive restore damaged.nu11vlt --salvage   # all that verifies
        All or nothing: every tag, size and digest is verified and every item staged before any \
        becomes visible; on any failure the destination is left exactly as it was. Items that \
        are already in the vault (or export files that are already there) unchanged are \
        skipped; one that differs stops the restore unless --overwrite. Expired fade items are \
        reported and skipped. On a machine without a key store, restoring a portable archive \
        creates one (like `init`). Exported files carry the item's created time as their \
        modification time.
        ITEM (an ID or a prefix of at least 4 characters) and --name GLOB restore only those \
        items, with the same checks. --salvage restores every item that verifies, names each \
        damaged or missing one (and each manifest page that does not read, whose items are \
        then known only by count) and exits with 3; it never writes an unverified byte. \
        Where this home trusts signers (`key trust`) or --signed-by is given, an archive \
        that no trusted key signed is refused (77) before any password is asked.
        """)

    @OptionGroup var input: ArchiveInput

    @Argument(help: ArgumentHelp("Restore only these items: IDs, ID prefixes (at least 4 characters) or exact names (globs go to --name).", valueName: "ITEM"))
    var items: [String] = []

    @Option(name: .customLong("name"), help: ArgumentHelp("Restore only items whose name matches GLOB (quote it; repeatable).", valueName: "GLOB"))
    var names: [String] = []

    @Flag(help: "Restore every item that verifies and name the damaged or missing ones (exit 3), instead of all or nothing; also what a copy cut short before its manifest's root still holds, or every page but a damaged one (exit 3).")
    var salvage = false
    @OptionGroup var vaultOptions: VaultOptions
    @OptionGroup var outputOptions: OutputOptions

    @Option(help: ArgumentHelp("Write plaintext files into DIR instead of restoring into a vault (- : the one ITEM to stdout).", valueName: "DIR"),
            completion: .directory)
    var export: String?

    @Flag(name: .customLong("dry-run"), help: "Verify and report what would be restored, writing nothing.")
    var dryRun = false

    @Flag(help: "Replace vault items (or export files) that differ from the archive's.")
    var overwrite = false

    func validate() throws {
        if export != nil && vaultOptions.vault != nil { throw ValidationError("--export and --vault exclude each other") }
        // No item's name holds a '/' and no ID does: such a word is a place to restore to,
        // given where an item goes (`restore a.nu11vlt ~/restored`). Said before a password.
        if let place = items.first(where: { $0.contains("/") }) {
            throw ValidationError("'\(place)' is no item (an item's ID or name has no '/'): to restore into a directory of files, "
                                  + "give --export '\(place)'; into another vault, --vault '\(place)'")
        }
        if export == "-" {
            if items.count + names.count != 1 { throw ValidationError("--export - writes one item to standard output: name it (ITEM or --name)") }
            if outputOptions.json || dryRun || salvage || overwrite {
                throw ValidationError("--export - writes the item's bytes alone: no --json, --dry-run, --salvage or --overwrite")
            }
        }
    }

    var options: RestoreOptions {
        RestoreOptions(overwrite: overwrite, dryRun: dryRun, salvage: salvage, selection: ItemSelection(ids: items, names: names))
    }

    func run() throws {
        // `--export -` writes an item's bytes as they verify: it reads a whole archive.
        let (reader, arriving) = export == "-" ? (try input.reader(progress: outputOptions.observer("download")), nil)
            : try input.readerAsItArrives(salvaging: salvage, progress: outputOptions.observer("download"))
        defer { arriving?.cancel() }
        if let arriving { try arriving.reportingItsFailure { try restore(reader) } } else { try restore(reader) }
    }

    private func restore(_ reader: ArchiveReader) throws {
        if reader.foundByLocalHeaders {
            Console.warning("the ZIP directory of '\(input.file)' is damaged: its entries were found by their local headers; every item restored is still verified (make a new archive)")
        }
        if export == "-" {
            try exportToStandardOutput(reader)
            return
        }
        let (report, createdKeyStore) = try export.map { (try exported(reader, into: $0), false) } ?? restoredIntoVault(reader)
        if outputOptions.json {
            try document(reader, report, createdKeyStore: createdKeyStore).write()
            if isPartial(report, reader) { throw PartialSuccess() }
            return
        }
        try summarize(report, rootMissing: reader.manifestRootMissing)
    }

    /// A salvage that left items out, or could not know them all (no root, a page lost): exit 3.
    private func isPartial(_ report: ArchiveRestorer.Report, _ reader: ArchiveReader) -> Bool {
        !report.damaged.isEmpty || !report.lostPages.isEmpty || reader.manifestRootMissing
    }

    /// The `--json` document (README "JSON output"). Its ID lists are read again from the
    /// archive as they are written, not held (issue 34).
    private func document(_ reader: ArchiveReader, _ report: ArchiveRestorer.Report,
                          createdKeyStore: Bool) throws -> Console.StreamedObject {
        var document = Console.StreamedObject()
        /// "ok", or "partial" when a salvage left damaged items out, or the manifest's root or
        /// a page of it was missing (exit 3).
        try document.add("outcome", isPartial(report, reader) ? "partial" : "ok")
        try document.add("command", "restore")
        try document.add("archive", input.file)
        try document.add("archiveId", reader.header.archiveIDHex)
        try document.add("mode", reader.header.mode.rawValue)
        /// "vault" or "export".
        try document.add("target", export == nil ? "vault" : "export")
        try document.add("destination", report.destination)
        try document.add("dryRun", dryRun)
        try document.add("items", report.written)
        try document.add("plaintextBytes", report.plaintextBytes)
        let lists: [(String, RestoreOutcome)] = [("restored", .restored), ("replaced", .replaced), ("repaired", .repaired),
                                                 ("skippedIdentical", .skippedIdentical), ("skippedExpired", .skippedExpired)]
        for (key, outcome) in lists { document.add(key, strings: { try report.forEachID(outcome, $0) }) }
        try document.add("damaged", report.damaged)
        /// A salvage found the entries by their local headers: the ZIP directory is damaged.
        try document.add("zipDirectoryDamaged", reader.foundByLocalHeaders)
        /// A salvage found no manifest root (a copy cut short): the items of the pages that
        /// arrived; whether the archive held more cannot be known.
        try document.add("manifestRootMissing", reader.manifestRootMissing)
        /// Manifest pages a salvage could not read: their items are known only by count and
        /// the first one's ID.
        try document.add("lostPages", report.lostPages.map { LostPageJSON(page: $0.number, items: $0.itemCount, firstId: $0.firstID, problem: $0.problem) })
        try document.add("createdKeyStore", createdKeyStore)
        try document.add("durationSeconds", Output.durationSeconds)
        return document
    }

    /// `--export DIR`: the items as plain files.
    private func exported(_ reader: ArchiveReader, into directory: String) throws -> ArchiveRestorer.Report {
        try ArchiveExporter.checkDestination(directory)
        let (archive, keyStore) = try input.unlock(reader, toleratingMissingItems: salvage)
        return try ArchiveExporter.export(archive, to: directory, keyStore: keyStore, options,
                                          progress: outputOptions.observer(dryRun ? "check" : "export"))
    }

    /// Into the home's vault (creating the key store on a machine that has none).
    private func restoredIntoVault(_ reader: ArchiveReader) throws -> (ArchiveRestorer.Report, createdKeyStore: Bool) {
        let restored = try HomeRestorer.restore({ try input.unlock(reader, toleratingMissingItems: salvage) },
                                                into: .init(home: input.store.resolvedHome,
                                                            vaultPath: vaultOptions.path(with: input.store),
                                                            lockWait: vaultOptions.lockWait,
                                                            loadKeyStore: { try input.store.loadKeyStore(prompting: !dryRun) }),
                                                options, progress: outputOptions.observer(dryRun ? "check" : "restore"))
        if restored.vaultNotCompared && ((try? FileStatus.of(input.store.resolvedHome.keyStorePath)) ?? nil) != nil {
            Console.note("the key store is PIN-protected and no PIN was given (--pin-file): verified the archive without comparing it with the vault")
        }
        if let created = restored.createdKeyStore {
            Console.note("no key store was in '\(input.store.resolvedHome.root)': created \(created) for the restored vault")
        }
        return (restored.restore, restored.createdKeyStore != nil)
    }

    /// The notes and summary line; each item a salvage left out, then exit 3 (also when the
    /// manifest's root was missing: what the archive held is not known).
    private func summarize(_ report: ArchiveRestorer.Report, rootMissing: Bool) throws {
        let verb = export == nil ? (dryRun ? "would restore" : "restored") : (dryRun ? "would export" : "exported")
        if report.count(.skippedExpired) > 0 { Console.note("skipped \(report.count(.skippedExpired)) expired fade item(s)") }
        if report.count(.skippedIdentical) > 0 {
            Console.note("skipped \(report.count(.skippedIdentical)) item(s) already \(export == nil ? "in the vault" : "exported") unchanged")
        }
        if report.count(.repaired) > 0 { Console.note("repaired \(report.count(.repaired)) damaged item(s) from the archive") }
        let replaced = report.count(.replaced)
        Console.summary("\(verb) \(report.written) item(s)\(replaced == 0 ? "" : " (\(replaced) replaced)"), \(Console.byteCount(report.plaintextBytes)) into \(report.destination)")
        for page in report.lostPages {
            Console.error("not restored: the \(page.itemCount) item(s) of manifest page \(page.number), the first \(page.firstID): the page does not read (\(page.problem))")
        }
        for item in report.damaged { Console.error("not restored: \(item.id) '\(item.name)': \(item.problem)") }
        if !report.damaged.isEmpty {
            Console.hint("\(report.damaged.count) damaged or missing item(s) were left out and nothing unverified was written; restore them from another copy of the archive")
        }
        if !report.lostPages.isEmpty {
            let lost = report.lostPages.reduce(0) { $0 + $1.itemCount }
            // Which of them a selection would have taken cannot be known: their names went with the page.
            let asked = options.selection.isEverything ? "" : " (whether any of them were among those asked for cannot be known)"
            Console.hint("the \(lost) item(s) of the \(report.lostPages.count) manifest page(s) that do not read were left out\(asked); restore them from another copy of the archive")
        }
        if !report.damaged.isEmpty || !report.lostPages.isEmpty { throw PartialSuccess() }
        if rootMissing {
            Console.hint("the items of the manifest pages that were not read are not known; restore them from another copy of the archive")
            throw PartialSuccess()
        }
    }

    /// `restore FILE ITEM --export -`: the one item's plaintext on stdout, after it verified.
    private func exportToStandardOutput(_ reader: ArchiveReader) throws {
        let (archive, keyStore) = try input.unlock(reader)
        let selected = try archive.selected(ItemSelection(ids: items, names: names))
        guard selected.count == 1 else {
            throw CLIError(.usage, "--export - writes one item, and that selection names \(selected.count)",
                           hint: "`n11archive list \(input.file)` shows the IDs and names")
        }
        let item = try archive.items.item(selected[0])
        try StandardOutputSink.refuseBinaryOnTerminal(item.kind == .photo, force: false, what: "item \(item.id)",
                                                      alternatives: "give a directory: --export DIR")
        // The key derivation's line ends before the item's bytes follow it on the terminal.
        ProgressLine.closeBar()
        _ = try ArchiveExporter.exportOne(archive, index: selected[0], keyStore: keyStore, to: StandardOutputSink())
        Console.note("wrote \(item.id) '\(item.name)' (\(Console.byteCount(item.size))) to standard output")
    }
}

/// A lost manifest page in `restore --json` (README "JSON output").
private struct LostPageJSON: Encodable {
    let page: Int
    let items: Int
    let firstId: String
    let problem: String
}
