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
            let inputs = try checkedInputs()
            let items = try fromCiphio ? ciphioNotes(compartment: target, expires: expires)
                                       : newItems(inputs, compartment: target, expires: expires)
            let vault = try vaultOptions.open(with: store, forWriting: true)
            // Stdin has no size to measure progress against: no bar for it.
            let observer = fromCiphio || inputs.contains(where: { $0 == nil }) || inputs.isEmpty ? nil
                : ProgressLine.observer("add", quiet: false, forced: progress)
            observer?.begin(items: items.count, bytes: inputs.reduce(0) { $0 + ($1?.size ?? 0) })
            // All or nothing, even if killed: one journaled commit (see VaultStaging). The
            // "added" lines come after it, so a failed add never lists an item as added.
            var skipped: [Vault.Duplicate] = []
            let added = try vault.add(items, now: now, skippingDuplicates: !allowDuplicates, progress: observer,
                                      skipped: { skipped.append($0) })
            report(added: added, skipped: skipped)
        }

        /// The FILEs and the --files-from list, each checked; nil for stdin ("-" is stdin only
        /// as a FILE argument: in a list it is a file named "-").
        private func checkedInputs() throws -> [InputFile?] {
            let listed = try filesFrom.map { try FileList.read($0, separator: nullSeparated ? 0 : UInt8(ascii: "\n")) } ?? []
            if let filesFrom, files.isEmpty && listed.isEmpty {
                throw CLIError(.missingInput, "the --files-from list \(filesFrom == "-" ? "on standard input" : "'\(filesFrom)'") names no file; nothing was added",
                               hint: "check the command that made the list (find prints nothing when nothing matches)")
            }
            let checked = try files.map { $0 == "-" ? nil : try InputFile.check($0, asNote: note) }
                + listed.map { try InputFile.check($0, asNote: note) }
            // Ciphio messages are checked as files here, and read whole by `ciphioNotes`.
            return fromCiphio ? [] : checked
        }

        /// The items of files and stdin.
        private func newItems(_ inputs: [InputFile?], compartment target: Compartment, expires: Date?) throws -> [Vault.NewItem] {
            let stdin = FileDescriptor(borrowing: 0, path: "stdin")
            return try (inputs.isEmpty ? [nil] : inputs).map { input in
                if let input {
                    return .init(file: input, kind: note ? .note : .photo, name: name ?? input.name, compartment: target, expires: expires)
                } else if note {
                    return .init(bytes: try InputFile.readNote(from: stdin), kind: .note, name: name ?? "note",
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
                                                            path: file ?? "stdin", secret: secret,
                                                            allowUnauthenticated: allowUnauthenticated,
                                                            name: name ?? file.map { Path.lastComponent(of: $0) } ?? "note",
                                                            compartment: target, expires: expires)
                TextCommand.warnUnauthenticated(algorithm, decrypting: true)
                return note
            }
        }

        /// One line per item added and per file skipped, then how many were skipped.
        private func report(added: [ItemMetadata], skipped: [Vault.Duplicate]) {
            for item in added {
                Console.out("added \(item.id)  \(item.kind.rawValue)  \(item.compartment.rawValue)  \(item.name)")
            }
            // The item's ID cut to 8 characters (a prefix every command takes) and its name
            // only when it differs: a line that fits 80 columns for most names.
            for duplicate in skipped {
                let other = duplicate.existing.name == duplicate.name ? "" : " '\(duplicate.existing.name)'"
                Console.out("skipped \(duplicate.name): same content as \(duplicate.existing.id.prefix(8))\(other)")
            }
            if !skipped.isEmpty {
                Console.note("\(skipped.count) already in the vault, skipped (--allow-duplicates adds them)")
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

        struct Listing: Encodable {
            let command = "vault list"
            let durationSeconds = Output.durationSeconds
            /// "ok", or "error" when records are damaged (then also exitCode, error, hint).
            let outcome: String
            let exitCode: Int32?
            let error: String?
            let hint: String?
            let vault: String
            let items: [Entry]
            let expiredHidden: Int
            /// IDs whose record is damaged (the command then exits 65).
            let damaged: [String]
        }
        struct Entry: Encodable {
            let id, kind, compartment, name: String
            let created: Date
            let expires: Date?
            let size: Int64
        }

        func run() throws {
            let vault = try vaultOptions.open(with: store, forWriting: false)
            let now = Date()
            let all = try vault.items(includeExpired: true, now: now).filter { item in
                (compartment == nil || item.compartment == compartment)
                    && (names.isEmpty || names.contains { ItemSelection.nameMatches($0, item.name) })
            }
            let live = all.filter { !$0.isExpired(at: now) }
            let hidden = all.count - live.count
            if json {
                // One document even when records are damaged: it carries the error itself.
                let failure = damagedFailure(in: vault, errors: try vault.damagedItemErrors())
                try Console.json(Listing(outcome: failure == nil ? "ok" : "error", exitCode: failure.map { ExitCode(for: $0.kind).rawValue },
                                         error: failure?.description, hint: failure?.hint, vault: vault.path, items: live.map {
                    Entry(id: $0.id, kind: $0.kind.rawValue, compartment: $0.compartment.rawValue, name: $0.name,
                          created: $0.created, expires: $0.expires, size: $0.size)
                }, expiredHidden: hidden, damaged: try vault.damagedItemIDs()))
                try reportDamaged(in: vault)
                return
            }
            ItemTable.print(live.map {
                .init(id: $0.id, kind: $0.kind.rawValue, compartment: $0.compartment.rawValue, size: $0.size,
                      created: $0.created, expires: $0.expires, name: $0.name)
            })
            if hidden > 0 { Console.note("\(hidden) expired fade item(s) hidden; `n11archive vault purge` removes them") }
            try reportDamaged(in: vault)
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
            // The catalogue a batch at a time: memory does not grow with the vault (issue 34).
            var count = 0, failed: [VaultError] = [], damagedSeen = 0
            func pass() throws {
                (count, failed, damagedSeen) = (0, [], 0)
                try vault.forEachItemInIDOrder { batch, damagedIDs in
                    damagedSeen += damagedIDs.count
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
func reportDamaged(in vault: Vault) throws {
    let damaged = try vault.damagedItemErrors()
    damaged.forEach { Console.error($0.description) }
    if let failure = damagedFailure(in: vault, errors: damaged) { throw failure }
}

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
    /// Lists are paths, not data: 64 MiB is millions of them.
    static let maximumSize = 64 << 20

    static func read(_ source: String, separator: UInt8) throws -> [String] {
        let fd: FileDescriptor
        let shown = source == "-" ? "on standard input" : "'\(source)'"
        if source == "-" {
            fd = FileDescriptor(borrowing: 0, path: "standard input")
        } else {
            guard try FileStatus.of(source, followLinks: true) != nil else {
                throw CLIError(.missingInput, "the --files-from list '\(source)' does not exist; nothing was added")
            }
            fd = try FileDescriptor.openForReading(source)
        }
        let bytes: [UInt8]
        do {
            bytes = try fd.readAll(limit: maximumSize)
        } catch {
            guard let system = error as? SystemError, system.isTooLarge else { throw error }
            throw CLIError(.usage, "the --files-from list \(shown) is larger than 64 MiB; nothing was added",
                           hint: "split it and run vault add once per part")
        }
        // The usual mix-up, caught before any path is looked at: a C path ends at its first
        // NUL, so a NUL-separated list read as lines would name only its first file.
        if separator != 0 && bytes.contains(0) {
            throw CLIError(.usage, "the --files-from list \(shown) has NUL bytes, so it is not one path per line; nothing was added",
                           hint: "a list made with find -print0 needs --null")
        }
        if separator == 0 && !bytes.isEmpty && !bytes.contains(0) {
            throw CLIError(.usage, "the --files-from list \(shown) has no NUL byte, but --null says paths end with one; nothing was added",
                           hint: "without --null the list is one path per line; with it, make the list with find -print0")
        }
        return try bytes.split(separator: separator).enumerated().map { index, entry in
            // Decoding with repair would turn a name into one that does not exist, or worse,
            // one that does: say which entry it is instead.
            guard let path = String(validating: entry, as: UTF8.self) else {
                throw CLIError(.usage, "entry \(index + 1) of the --files-from list \(shown) is not valid UTF-8; nothing was added",
                               hint: "rename that file so its name is UTF-8")
            }
            return path
        }
    }
}
