import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11Vault

struct VaultCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vault",
        abstract: "Add, list, read and remove vault items.",
        discussion: """
        Examples:
          n11archive vault add IMG_0001.jpg
          n11archive vault list
          n11archive vault cat 3F2A9C1B -o photo.jpg
        """,
        subcommands: [Add.self, List.self, Cat.self, Remove.self, Purge.self, VerifyVault.self, RotateKeys.self])
}

extension VaultCommand {
    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Encrypt files into the vault as photos or notes.",
            discussion: """
            Examples:
              n11archive vault add IMG_0001.jpg IMG_0002.heic
              n11archive vault add --note todo.txt
              echo "door code 4711" | n11archive vault add --note --name door
              curl -s https://example.org/p.jpg | n11archive vault add - --name p.jpg
              n11archive vault add --fade 7d boarding-pass.png
              n11archive vault add --note --from-ciphio message.txt --password-file pw
              find ~/Pictures -type f -print0 | n11archive vault add --null --files-from -
            Either every file is added or none is: the "added" lines are printed once all of \
            them are in the vault. A file whose content the vault already holds (a photo of \
            the same bytes, in the same compartment) is skipped and named on a "skipped" line; \
            --allow-duplicates adds it anyway. Each item's created time is its file's \
            modification time (the time of the add for stdin), and an export gives it back. \
            A directory is not walked: list its files with find (last example). \
            - is stdin. With --from-ciphio each FILE (or stdin) \
            is a Ciphio text message (`n11archive text --help`), decrypted in memory \
            straight into a sealed note: the plaintext never touches the disk.
            """)

        @OptionGroup var store: StoreOptions
        @OptionGroup var vaultOptions: VaultOptions

        @Argument(help: ArgumentHelp("Files to add; - is stdin (so is no FILE with --note).", valueName: "FILE"),
                  completion: .file())
        var files: [String] = []

        @Option(name: .customLong("files-from"),
                help: ArgumentHelp("Also add the files listed in LIST, one path per line (- is stdin). Faster than thousands of FILE arguments.",
                                   valueName: "LIST"),
                completion: .file())
        var filesFrom: String?

        @Flag(name: .customLong("null"), help: "With --files-from: the paths are separated by NUL bytes (find -print0), not lines.")
        var nullSeparated = false

        @Flag(help: "Add as notes (UTF-8 text) instead of photos.")
        var note = false

        @Option(help: ArgumentHelp("Name to store (default: the file name; for stdin, \"note\").", valueName: "NAME"))
        var name: String?

        @Option(help: ArgumentHelp("Make fade items that expire after DURATION (90s, 30m, 12h, 7d, 2w).", valueName: "DURATION"))
        var fade: String?

        @Option(help: ArgumentHelp("vault, fade or backup (default: vault, or fade with --fade).", valueName: "NAME"))
        var compartment: Compartment?

        @Flag(name: .customLong("from-ciphio"), help: "With --note: each FILE (or stdin) is a Ciphio message to decrypt into the note.")
        var fromCiphio = false

        @Flag(name: .customLong("allow-unauthenticated"),
              help: "With --from-ciphio: accept cbc and ctr messages, which are not authenticated (a change, or a wrong password, goes unnoticed).")
        var allowUnauthenticated = false

        @OptionGroup var password: PasswordOptions

        @Flag(name: .customLong("allow-duplicates"),
              help: "Add files whose content an item of the same compartment already has (by default they are skipped).")
        var allowDuplicates = false

        @Flag(help: "Show progress even when stderr is not a terminal.")
        var progress = false

        func validate() throws {
            if files.filter({ $0 == "-" }).count > 1 { throw ValidationError("- (stdin) can be given once") }
            if files.isEmpty && !note && filesFrom == nil {
                throw ValidationError("give one or more FILEs (or --files-from LIST), or --note to read a note from stdin")
            }
            if filesFrom == "-" && files.contains("-") { throw ValidationError("stdin cannot be both a FILE and the --files-from list") }
            if nullSeparated && filesFrom == nil { throw ValidationError("--null goes with --files-from") }
            if filesFrom != nil && name != nil { throw ValidationError("--name needs a single FILE, not a --files-from list") }
            if fromCiphio && !note { throw ValidationError("--from-ciphio adds notes: give --note too") }
            if fromCiphio && filesFrom != nil { throw ValidationError("--from-ciphio takes its messages as FILEs, not a --files-from list") }
            if allowUnauthenticated && !fromCiphio { throw ValidationError("--allow-unauthenticated goes with --from-ciphio") }
            if name != nil && files.count > 1 { throw ValidationError("--name needs a single FILE (or stdin)") }
            if let fade {
                do { _ = try FadeDuration.seconds(from: fade) } catch { throw ValidationError("\(error)") }
            }
            if compartment == .fade && fade == nil { throw ValidationError("fade items expire: give --fade DURATION") }
            if fade != nil, let compartment, compartment != .fade {
                throw ValidationError("--fade makes fade items; it cannot go with --compartment \(compartment.rawValue)")
            }
        }

        func run() throws {
            let target: Compartment = fade != nil ? .fade : (compartment ?? .vault)
            let now = Date()
            let expires = try fade.map { now.addingTimeInterval(try FadeDuration.seconds(from: $0)) }
            // Every input is checked (and every message opened) before the vault is: a bad one,
            // or a wrong password, adds nothing.
            // No FILE and no list: a note from stdin. Ciphio messages are checked as files
            // here, and read whole by `ciphioNotes`.
            let inputs = try CheckedInputs(files: files.isEmpty && filesFrom == nil ? ["-"] : files, filesFrom: filesFrom,
                                           separator: nullSeparated ? 0 : UInt8(ascii: "\n"), asNote: note, fromCiphio: fromCiphio)
            let messages = try fromCiphio ? ciphioNotes(compartment: target, expires: expires) : []
            let vault = try vaultOptions.open(with: store, forWriting: true)
            // Stdin has no size to measure progress against: no bar for it.
            let observer = fromCiphio || inputs.readsStandardInput ? nil : ProgressLine.observer("add", quiet: false, forced: progress)
            observer?.begin(items: inputs.count, bytes: inputs.bytes)
            // All or nothing, even if killed: one journaled commit (see VaultStaging). The
            // "added" lines come after it, so a failed add never lists an item as added; they
            // wait in sealed spools, not in memory (issue 34).
            let added = try SpoolFile(in: Output.spoolDirectory), skipped = try SpoolFile(in: Output.spoolDirectory)
            var skippedAsGivenTwice = 0
            let next: () throws -> Vault.NewItem?, count: Int
            if !fromCiphio {
                let input = try inputs.reader()
                next = { try input().map { try newItem($0, stdinNote: inputs.standardInputNote, compartment: target, expires: expires) } }
                count = inputs.count
            } else {
                var message = messages.makeIterator()
                next = { message.next() }
                count = messages.count
            }
            try vault.add(from: next, count: count, now: now, skippingDuplicates: !allowDuplicates, progress: observer, staged: { item in
                try added.append(Array("added \(item.id)  \(item.kind.rawValue)  \(item.compartment.rawValue)  \(item.name)".utf8))
            }, skipped: { duplicate in
                // The item's ID cut to 8 characters (a prefix every command takes) and its name
                // only when it differs: a line that fits 80 columns for most names.
                let other = duplicate.existing.name == duplicate.name ? "" : " '\(duplicate.existing.name)'"
                // A file given twice (or a folder's two copies of a photo) is not "already in
                // the vault": it was added a moment ago, by this same command.
                let when = duplicate.addedInThisCall ? ", added above" : ""
                if duplicate.addedInThisCall { skippedAsGivenTwice += 1 }
                try skipped.append(Array("skipped \(duplicate.name): same content as \(duplicate.existing.id.prefix(8))\(other)\(when)".utf8))
            })
            // Written out before the note below, and before an error in reading them back.
            var lines = Console.LineWriter()
            do {
                for spool in [added, skipped] {
                    let spooled = try spool.reader()
                    while let line = try spooled.next() { lines.write(String(decoding: line, as: UTF8.self)) }
                }
            } catch {
                lines.finish()
                throw error
            }
            lines.finish()
            let skippedAsKnown = skipped.count - skippedAsGivenTwice
            let counts = [skippedAsKnown > 0 ? "\(skippedAsKnown) already in the vault" : nil,
                          skippedAsGivenTwice > 0 ? "\(skippedAsGivenTwice) with the same content as a file added above" : nil]
            if skipped.count > 0 {
                Console.note("\(counts.compactMap { $0 }.joined(separator: ", ")), skipped (--allow-duplicates adds them)")
            }
        }

        /// The item of a file or of stdin.
        private func newItem(_ input: CheckedInputs.Input, stdinNote: [UInt8]?, compartment target: Compartment, expires: Date?) throws -> Vault.NewItem {
            switch input {
            case .file(let file):
                return .init(file: file, kind: note ? .note : .photo, name: name ?? file.name, compartment: target, expires: expires)
            case .note(let read):
                return .init(note: read, name: name ?? read.file.name, compartment: target, expires: expires)
            case .standardInput:
                let stdin = FileDescriptor(borrowing: 0, path: "stdin")
                if note {
                    return .init(bytes: try stdinNote ?? InputFile.readNote(from: stdin), kind: .note, name: name ?? "note",
                                 compartment: target, expires: expires)
                }
                // A photo from stdin streams through, however large.
                return .init(source: stdin, kind: .photo, name: name ?? "stdin", compartment: target, expires: expires)
            }
        }

        /// `--from-ciphio`: each FILE (or stdin) a Ciphio message, decrypted in memory into a
        /// note (`CiphioText.note`).
        private func ciphioNotes(compartment target: Compartment, expires: Date?) throws -> [Vault.NewItem] {
            let secret = try password.read(confirm: false)
            let sources = files.isEmpty ? [nil] : files.map { $0 == "-" ? nil : Optional($0) }
            return try sources.map { file -> Vault.NewItem in
                var raw = try TextCommand.readInput(file)
                let message = String(decoding: raw, as: UTF8.self)
                raw.wipe()
                let (note, algorithm) = try CiphioText.note(from: message, source: file.map { "'\($0)'" } ?? "standard input",
                                                            secret: secret,
                                                            allowUnauthenticated: allowUnauthenticated,
                                                            name: name ?? file.map { Path.lastComponent(of: $0) } ?? "note",
                                                            compartment: target, expires: expires)
                TextCommand.warnUnauthenticated(algorithm, decrypting: true)
                return note
            }
        }
    }

    struct List: ParsableCommand, ChoosesOutput {
        static let configuration = CommandConfiguration(
            abstract: "List the live items (expired fade items are hidden).",
            discussion: """
            Examples:
              n11archive vault list
              n11archive vault list --compartment fade
              n11archive vault list --json | jq '.items[].id'
            """)

        @OptionGroup var store: StoreOptions
        @OptionGroup var vaultOptions: VaultOptions

        @Flag(help: "Print one JSON document instead of a table (also on failure).")
        var json = false

        @Option(help: ArgumentHelp("Only items of this compartment.", valueName: "NAME"))
        var compartment: Compartment?

        @Option(name: .customLong("name"), help: ArgumentHelp("Only items whose name matches GLOB (quote it; repeatable).", valueName: "GLOB"))
        var names: [String] = []

        struct Entry: Encodable {
            let id, kind, compartment, name: String
            let created: Date
            let expires: Date?
            let size: Int64
        }

        func run() throws {
            let vault = try vaultOptions.open(with: store, forWriting: false)
            let now = Date()
            let (compartment, names) = (compartment, names)
            // The catalogue a batch at a time, in ID order, each live item handed to `take`:
            // memory for a batch and a sort run, not for the vault (issue 34).
            var hidden = 0, damagedSeen = 0
            func pass(_ take: (ItemMetadata) throws -> Void) throws {
                (hidden, damagedSeen) = (0, 0)
                try vault.forEachItemInIDOrder { batch, damagedIDs in
                    damagedSeen += damagedIDs.count
                    for item in batch where (compartment == nil || item.compartment == compartment)
                        && (names.isEmpty || names.contains { ItemSelection.nameMatches($0, item.name) }) {
                        if item.isExpired(at: now) { hidden += 1 } else { try take(item) }
                    }
                    return true
                }
            }
            // Records that did not open are tried with the key store read again (another
            // process may have rotated the keys meanwhile); if that opens some, once more.
            func listed<Listing>(_ make: () -> Listing, _ take: (inout Listing, ItemMetadata) throws -> Void) throws -> (Listing, [VaultError]) {
                var listing = make()
                try pass { try take(&listing, $0) }
                var damaged = damagedSeen > 0 ? try vault.damagedItemErrors() : []
                if damaged.count < damagedSeen {
                    listing = make()
                    try pass { try take(&listing, $0) }
                    damaged = damagedSeen > 0 ? try vault.damagedItemErrors() : []
                }
                return (listing, damaged)
            }
            if json {
                // One document even when records are damaged: it carries the error itself.
                // Sorted by creation time, then ID, as before; spooled past a run.
                var (sorter, damaged) = try listed({
                    ExternalSorter<ItemTable.Row>(runLength: Output.sortRunRows, directory: Output.spoolDirectory, encode: ItemTable.encode, decode: ItemTable.decode,
                                                  key: \.createdOrder) { $0.id < $1.id }
                }) { sorter, item in try sorter.add(ItemTable.Row(item)) }
                let failure = damagedFailure(in: vault, errors: damaged)
                var document = Console.StreamedObject()
                try document.add("command", "vault list")
                try document.add("durationSeconds", Output.durationSeconds)
                try document.add("outcome", failure == nil ? "ok" : "error")
                if let failure {
                    try document.add("exitCode", ExitCode(for: failure.kind).rawValue)
                    try document.add("error", failure.description)
                    if let hint = failure.hint { try document.add("hint", hint) }
                }
                try document.add("vault", vault.path)
                document.add("items", elements: { (body: (Entry) throws -> Void) in
                    try sorter.forEachSorted { row in
                        try body(Entry(id: row.id, kind: row.kind, compartment: row.compartment, name: row.name,
                                       created: row.created, expires: row.expires, size: row.size))
                    }
                })
                try document.add("expiredHidden", hidden)
                try document.add("damaged", damaged.isEmpty ? [] : try vault.damagedItemIDs())
                try document.write()
                damaged.forEach { Console.error($0.description) }
                if let failure { throw failure }
                return
            }
            var (table, damaged) = try listed({ ItemTable() }) { table, item in try table.add(ItemTable.Row(item)) }
            try table.print()
            if hidden > 0 { Console.note("\(hidden) expired fade item(s) hidden; `n11archive vault purge` removes them") }
            damaged.forEach { Console.error($0.description) }
            if let failure = damagedFailure(in: vault, errors: damaged) { throw failure }
        }
    }

    struct Cat: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Decrypt one item to stdout or to a file.",
            discussion: """
            Examples:
              n11archive vault cat 3F2A9C1B > photo.jpg
              n11archive vault cat 3F2A9C1B -o photo.jpg
              n11archive vault cat 'IMG_0001.jpg' -o ~/Pictures/   # keeps the name
            The item's tag is verified before anything is written: with -o the file appears only \
            if the item is intact; to stdout, the item is checked in a first pass and decrypted \
            in a second, from the same open file. A photo is not written to a terminal unless \
            --force.
            """)

        @OptionGroup var store: StoreOptions
        @OptionGroup var vaultOptions: VaultOptions

        @Argument(help: ArgumentHelp("The item: its ID, a unique ID prefix (4+ characters), or a name (or glob) only it has.", valueName: "ITEM"))
        var id: String

        @Option(name: [.short, .customLong("output")],
                help: ArgumentHelp("Write the plaintext to FILE (mode 0600); DIR/ keeps the stored name; - is stdout.", valueName: "FILE"),
                completion: .file())
        var output: String?

        @Flag(help: "Replace FILE if it exists; write a photo to a terminal.")
        var force = false

        func run() throws {
            let vault = try vaultOptions.open(with: store, forWriting: false)
            let item = try vault.item(matching: id, orName: true)
            guard let output, output != "-" else {
                try StandardOutputSink.refuseBinaryOnTerminal(item.kind == .photo, force: force, what: "item \(item.id)")
                try vault.verifyThenRead(item, into: StandardOutputSink())
                return
            }
            let path = try OutputPath.resolve(output, storedName: item.name, id: item.id)
            try OutputPath.requireFolder(of: path)
            if !force, (try? FileStatus.of(path)) ?? nil != nil {
                throw CLIError(.outputExists, "'\(path)' already exists; nothing was written", hint: "pass --force to replace it")
            }
            // Plaintext a killed `cat -o` left here (its writer is gone): remove it first.
            AtomicFile.removeLeftovers(in: Path.directory(of: Path.absolute(path)))
            let file = try AtomicFile(path: path, mode: 0o600)
            try vault.read(item, into: StagedFileSink(file))
            // The item's time, as an export gives it (its file's time when it was added).
            try file.descriptor.setModificationTime(secondsSince1970: Int64(item.created.timeIntervalSince1970.rounded(.down)))
            do { try file.commit(replaceExisting: force) }
            catch let error as SystemError where error.isAlreadyExisting {
                throw CLIError(.outputExists, "'\(path)' appeared meanwhile; nothing was written", hint: "pass --force to replace it")
            }
            if path != output { Console.note("wrote \(item.id) to '\(path)'") }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm",
            abstract: "Remove items from the vault.",
            discussion: "Examples:\n  n11archive vault rm 3F2A9C1B\n  n11archive vault rm 'IMG_0001.jpg'   # a name only one item has")

        @OptionGroup var store: StoreOptions
        @OptionGroup var vaultOptions: VaultOptions

        @Argument(help: ArgumentHelp("The items: an ID, a unique ID prefix (4+ characters), or the exact name only that item has.", valueName: "ITEM"))
        var ids: [String]

        func validate() throws {
            if ids.isEmpty { throw ValidationError("give the ID of at least one item") }
        }

        func run() throws {
            let vault = try vaultOptions.open(with: store, forWriting: true)
            // Resolve all IDs first: one unknown ID removes nothing. A full ID whose record is
            // damaged can be removed too (it cannot be listed or read).
            let damaged = Set(try vault.damagedItemIDs())
            var items: [ItemMetadata] = [], damagedIDs: [String] = []
            for id in ids {
                if damaged.contains(id.uppercased()) {
                    damagedIDs.append(id.uppercased())
                } else {
                    items.append(try Self.resolve(id, in: vault))
                }
            }
            try vault.remove(items)
            for id in damagedIDs { try vault.removeDamaged(id: id) }
            for item in items { Console.out("removed \(item.id)  \(item.name)") }
            for id in damagedIDs { Console.out("removed \(id)  (damaged)") }
        }

        /// An item to remove: by its ID or a unique prefix, or by a name only it has, taken
        /// exactly (no glob: `photo[1].jpg` must not remove `photo1.jpg`). A word that is both
        /// a prefix of one item's ID and another item's name is refused: deleting is not a
        /// place to guess.
        static func resolve(_ word: String, in vault: Vault) throws -> ItemMetadata {
            let byID = try? vault.item(matching: word)
            let byName = try vault.items().filter { $0.name == word }
            switch (byID, byName.count) {
            case (let item?, 0): return item
            case (let item?, _) where byName.allSatisfy({ $0.id == item.id }): return item
            case (_?, _):
                throw CLIError(.missingInput, "'\(word)' is both the start of an item's ID and another item's name; nothing was removed",
                               hint: "give the full ID (`n11archive vault list` shows them)")
            case (nil, 1): return byName[0]
            case (nil, 0): return try vault.item(matching: word)   // says why: not found, too short, ambiguous
            case (nil, _):
                throw CLIError(.missingInput, "\(byName.count) items are named '\(word)'; nothing was removed",
                               hint: "give the ID of the one to remove (`n11archive vault list` shows them)")
            }
        }
    }

    struct Purge: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete the fade items whose time has run out.",
            discussion: "Example (e.g. hourly from cron):\n  n11archive vault purge")

        @OptionGroup var store: StoreOptions
        @OptionGroup var vaultOptions: VaultOptions

        func run() throws {
            let vault = try vaultOptions.open(with: store, forWriting: true)
            let removed = try vault.purgeExpired()
            for item in removed { Console.out("purged \(item.id)  \(item.name)") }
            Console.note("\(removed.count) expired item(s) purged")
        }
    }
}

extension VaultCommand {
    struct VerifyVault: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Check every item's tag (expired fade items too), writing nothing.",
            discussion: """
            Example (e.g. weekly from cron):
              n11archive vault verify
            Exit 0 only if every item is intact; otherwise each damaged item is named and the \
            exit status is 65.
            """)

        @OptionGroup var store: StoreOptions
        @OptionGroup var vaultOptions: VaultOptions

        func run() throws {
            let vault = try vaultOptions.open(with: store, forWriting: false)
            // The catalogue a batch at a time: memory does not grow with the vault (issue 34);
            // content files in the order of their inodes, about in sequence on the disk.
            var count = 0, failed: [VaultError] = [], damagedSeen = 0
            // From a cold cache each small file was a disk read waited for alone, and in a
            // folder of millions of notes each name's lookup cost more than the item's other
            // work: a thread of its own opens each batch's files ahead of the pass and asks
            // the kernel for them (`HintThread`), so many reads are in flight and the pass
            // finds the names looked up.
            let hints = HintThread(files: .own)
            defer { hints.finish() }
            func pass() throws {
                (count, failed, damagedSeen) = (0, [], 0)
                try vault.forEachItemInDiskOrder { batch, damagedIDs in
                    damagedSeen += damagedIDs.count
                    hints.hint(batch.map { vault.contentPath(of: $0) })
                    for item in batch {
                        count += 1
                        do throws(VaultError) { try vault.verify(item) } catch {
                            Console.error(error.description)
                            failed.append(error)
                        }
                    }
                    return true
                }
            }
            try pass()
            // Records that did not open are tried with the key store read again (another
            // process may have rotated the keys meanwhile); if that opens some, once more.
            var damaged = damagedSeen > 0 ? try vault.damagedItemErrors() : []
            if damaged.count < damagedSeen {
                try pass()
                damaged = damagedSeen > 0 ? try vault.damagedItemErrors() : []
            }
            damaged.forEach { Console.error($0.description) }
            if let first = (damaged + failed).first {
                throw CLIError(first.kind, "\(damaged.count + failed.count) of \(count + damaged.count) item(s) failed verification",
                               hint: first.hint)
            }
            Console.out("ok: \(count) item(s) in \(vault.path) verified")
        }
    }
}

/// Names every item whose record is damaged and fails the command (65) after its output.
func damagedFailure(in vault: Vault, errors damaged: [VaultError]) -> CLIError? {
    guard let first = damaged.first else { return nil }
    return CLIError(first.kind, "\(damaged.count) item record(s) in '\(vault.path)' are damaged",
                    hint: "restore them from an archive, or remove them with `n11archive vault rm FULL-ID`")
}

extension Compartment: ExpressibleByArgument {}

/// The paths of a `--files-from` list (tar -T, restic --files-from): one per line, or
/// NUL-separated for names with newlines in them; empty entries are skipped, a trailing
/// "\r" is kept (it may be part of a name).
enum FileList {
    /// One path is at most PATH_MAX bytes: a longer entry means the file is no list of paths.
    static let maximumEntry = 4096

    /// Where an entry is in the list, for messages: "line 3 of the --files-from list 'l.txt'"
    /// (empty lines counted, so that an editor's line number finds it), or "entry 3" of a
    /// --null list.
    static func position(_ number: Int, of source: String, separator: UInt8) -> String {
        "\(separator == 0 ? "entry" : "line") \(number) of the --files-from list \(shown(source))"
    }

    static func shown(_ source: String) -> String { source == "-" ? "on standard input" : "'\(source)'" }

    /// Hands each path of the list to `body` as it is read (a list of millions of paths is
    /// never held, issue 34), with its line (or --null entry) number, empty ones counted. The
    /// mix-ups are refused with what to do: NUL bytes in a list of lines, none in a --null
    /// list, an entry that is not UTF-8 or longer than a path can be.
    static func forEach(_ source: String, separator: UInt8, _ body: (String, Int) throws -> Void) throws {
        let fd: FileDescriptor
        let shown = shown(source)
        if source == "-" {
            fd = FileDescriptor(borrowing: 0, path: "standard input")
        } else {
            guard try FileStatus.of(source, followLinks: true) != nil else {
                throw CLIError(.missingInput, "the --files-from list '\(source)' does not exist; nothing was added")
            }
            fd = try FileDescriptor.openForReading(source)
        }
        // `index`: the number of the entry being read, empty ones counted.
        var buffer = [UInt8](repeating: 0, count: 1 << 16), entry: [UInt8] = [], index = 1, sawNUL = false, sawAny = false
        func finish() throws {
            defer { entry.removeAll(keepingCapacity: true); index += 1 }
            guard !entry.isEmpty else { return }
            // Decoding with repair would turn a name into one that does not exist, or worse,
            // one that does: say which entry it is instead.
            guard let path = String(validating: entry, as: UTF8.self) else {
                throw CLIError(.usage, "\(position(index, of: source, separator: separator)) is not valid UTF-8; nothing was added",
                               hint: "rename that file so its name is UTF-8")
            }
            try body(path, index)
        }
        while true {
            let n = try fd.read(into: &buffer, count: buffer.count)
            if n == 0 { break }
            sawAny = true
            for byte in buffer[0..<n] {
                if byte == 0 {
                    // The usual mix-up, caught before the vault is opened: a C path ends at its
                    // first NUL, so a NUL-separated list read as lines would name only its first file.
                    guard separator == 0 else {
                        throw CLIError(.usage, "the --files-from list \(shown) has NUL bytes, so it is not one path per line; nothing was added",
                                       hint: "a list made with find -print0 needs --null")
                    }
                    sawNUL = true
                }
                if byte == separator { try finish(); continue }
                entry.append(byte)
                if entry.count > maximumEntry {
                    if separator == 0 && !sawNUL {
                        throw CLIError(.usage, "the --files-from list \(shown) has no NUL byte, but --null says paths end with one; nothing was added",
                                       hint: "without --null the list is one path per line; with it, make the list with find -print0")
                    }
                    throw CLIError(.usage, "\(position(index, of: source, separator: separator)) is longer than any path (\(maximumEntry) bytes); nothing was added",
                                   hint: separator == 0 ? "check the command that made the list" : "a list made with find -print0 needs --null")
                }
            }
        }
        if separator == 0 && sawAny && !sawNUL {
            throw CLIError(.usage, "the --files-from list \(shown) has no NUL byte, but --null says paths end with one; nothing was added",
                           hint: "without --null the list is one path per line; with it, make the list with find -print0")
        }
        try finish()
    }
}

/// The first pass's check of the --files-from list's paths (a `stat` each, and the file's
/// kind and size) on two threads of their own, batches ahead of the thread that reads the
/// list and spools the paths (`CheckedInputs`). On one thread a million notes' checks were
/// about 3 s of CPU against 1.3 s for reading and spooling the list (BENCHMARKS.md, issue 34). The results come back in list order, so the first bad
/// path in the list is the one named, as before (`CheckedInputs` drains the checks before
/// refusing a list that turns out malformed after it).
private final class ListedPathChecks {
    /// A listed path, its number in the list, and its size or why it is refused.
    typealias Checked = (path: String, number: Int, size: Result<Int64, any Error>)
    /// Two, taking the batches in turn: the list reader's own work (1.3 s for a million
    /// paths) is less than half the checks'.
    private let threads: [ReadAheadThread<Result<Int64, any Error>>]
    /// The paths and numbers of the batches given to the threads, oldest first, and how
    /// many batches have been given.
    private var given: [[(path: String, number: Int)]] = []
    private var givenCount = 0
    private var gathering: [(path: String, number: Int)] = []

    init(asNote: Bool) {
        threads = (0..<2).map { _ in ReadAheadThread { path in Result { try InputFile.check(path, asNote: asNote).size } } }
        gathering.reserveCapacity(ReadAheadPaths<Int>.batch)
    }

    /// Gives `path` to be checked; returns the oldest batch's results once two more a thread
    /// are given (so neither thread waits while the list goes on).
    func add(_ path: String, number: Int) -> [Checked]? {
        gathering.append((path, number))
        guard gathering.count == ReadAheadPaths<Int>.batch else { return nil }
        give()
        gathering.removeAll(keepingCapacity: true)
        return given.count > 2 * threads.count ? take() : nil
    }

    /// After the list's last path: the results of the batches not yet handed back, oldest
    /// first, one batch a call; nil when none is left.
    func next() -> [Checked]? {
        if !gathering.isEmpty {
            give()
            gathering = []
        }
        return given.isEmpty ? nil : take()
    }

    private func give() {
        threads[givenCount % threads.count].give(gathering.map(\.path))
        given.append(gathering)
        givenCount += 1
    }

    /// The oldest batch given: batch n went to thread n % 2.
    private func take() -> [Checked] {
        let thread = threads[(givenCount - given.count) % threads.count]
        return zip(given.removeFirst(), thread.take()).map { ($0.path, $0.number, $1) }
    }

    deinit { for thread in threads { thread.finish() } }
}

/// What `vault add` takes: the FILEs and the --files-from list, every one checked in a first
/// pass before the vault is opened (a bad one adds nothing). The list's paths are kept for
/// the second pass in a sealed spool, not in memory (a list of millions, issue 34), and
/// checked again as they are added.
struct CheckedInputs {
    enum Input {
        case file(InputFile)
        /// A note file, checked again and read in the second pass.
        case note(NoteFile)
        case standardInput
    }
    private let arguments: [Input]
    private let listed: SpoolFile?
    /// A note from stdin, read in the first pass (before the vault is opened and locked).
    let standardInputNote: [UInt8]?
    private let asNote: Bool
    let count: Int
    let bytes: Int64
    var readsStandardInput: Bool { arguments.contains { if case .standardInput = $0 { return true } else { return false } } }

    init(files: [String], filesFrom: String?, separator: UInt8, asNote: Bool, fromCiphio: Bool = false) throws {
        self.asNote = asNote
        arguments = try files.map { $0 == "-" ? .standardInput : .file(try InputFile.check($0, asNote: asNote)) }
        standardInputNote = asNote && !fromCiphio && files.contains("-")
            ? try InputFile.readNote(from: FileDescriptor(borrowing: 0, path: "stdin")) : nil
        var count = arguments.count
        var bytes = arguments.reduce(Int64(0)) { total, input in if case .file(let file) = input { total + file.size } else { total } }
        if let filesFrom {
            let spool = try SpoolFile(in: Output.spoolDirectory)
            let checks = ListedPathChecks(asNote: asNote)
            // The paths are spooled in list order, each once its check has passed.
            var spoolFailed = false
            let spoolChecked = { (checked: [ListedPathChecks.Checked]) throws in
                for (path, number, size) in checked {
                    do {
                        bytes += try size.get()
                        count += 1
                        try spool.append(Array(path.utf8))
                    } catch let error as CategorizedError {
                        spoolFailed = true
                        // A list of thousands: say where the path is, for the editor or `sed -n Np`.
                        throw CLIError(error.kind, "\(error) (\(FileList.position(number, of: filesFrom, separator: separator)))",
                                       hint: error.hint)
                    } catch {
                        spoolFailed = true
                        throw error
                    }
                }
            }
            do {
                try FileList.forEach(filesFrom, separator: separator) { path, number in
                    try checks.add(path, number: number).map(spoolChecked)
                }
            } catch {
                // The list is malformed further on (`FileList`): a bad path before that point,
                // still being checked, is named first, as when each path was checked in its turn.
                if !spoolFailed { while let checked = checks.next() { try spoolChecked(checked) } }
                throw error
            }
            while let checked = checks.next() { try spoolChecked(checked) }
            if files.isEmpty && spool.count == 0 {
                throw CLIError(.missingInput, "the --files-from list \(FileList.shown(filesFrom)) names no file; nothing was added",
                               hint: "check the command that made the list (find prints nothing when nothing matches)")
            }
            listed = spool
        } else {
            listed = nil
        }
        self.count = count
        self.bytes = bytes
    }

    /// The largest note read ahead of its turn: 64 notes × 6 batches of these are 6 MiB.
    static let readAheadNoteBytes = 16 << 10

    /// How many threads read the listed notes ahead, each a batch of 64 in turn: from a
    /// cold cache each waits on one read at a time, and one thread made a 100,000-note add
    /// take 10.2-10.8 s against 5.9-7.6 s with four (BENCHMARKS.md, issue 34).
    static let noteReadingThreads = 4

    /// A listed note as the read-ahead threads left it: read, failed, or (nil) left to be read
    /// in its turn.
    struct ReadAhead: Sendable {
        let path: String
        let note: Result<NoteFile?, any Error>
    }

    /// The inputs in order, one at a time (nil after the last); once. Each file is checked
    /// again; a note is read there and then, once (`InputFile.readNote(at:)`). The listed
    /// notes are read up to five batches ahead of their turn on threads of their own
    /// (`ReadAheadPaths`), and the listed photos hinted to the kernel so (`HintedPaths`);
    /// a note's failure is met in its turn, as if it had been read then.
    func reader() throws -> () throws -> Input? {
        var next = arguments.makeIterator()
        let spooled = try listed?.reader()
        // The threads start with the list's first path, not for FILE arguments alone.
        lazy var hinted = HintedPaths()
        // Only small notes are read ahead (at most six batches of 64 are held), a
        // larger one in its turn.
        lazy var notes = ReadAheadPaths<ReadAhead>(threads: Self.noteReadingThreads) { path in
            ReadAhead(path: path, note: Result { try InputFile.readNote(at: path, ifAtMost: Self.readAheadNoteBytes) })
        }
        let asNote = asNote
        return {
            if let argument = next.next() {
                guard asNote, case .file(let file) = argument else { return argument }
                return .note(try InputFile.readNote(at: file.path))
            }
            guard let spooled else { return nil }
            let source = { try spooled.next().map { String(decoding: $0, as: UTF8.self) } }
            if asNote {
                guard let read = try notes.next(from: source) else { return nil }
                return .note(try read.note.get() ?? InputFile.readNote(at: read.path))
            }
            return try hinted.next(from: source).map { .file(try InputFile.check($0, asNote: false)) }
        }
    }
}
