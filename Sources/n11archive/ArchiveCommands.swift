import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11Vault

struct Create: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Back the vault up into an encrypted .nu11vlt archive.",
        discussion: """
        Examples:
          n11archive create --portable -o vault.nu11vlt   # asks for a password twice
          n11archive create --portable -o vault.nu11vlt --password-file ~/.n11pass
          n11archive create --secure -o nightly.nu11vlt --force   # this machine only
          n11archive create --secure --compartment backup -o backup.nu11vlt
          n11archive create --portable --output-dir ~/backups --password-file pw
        With --output-dir DIR the archive is named n11archive-YYYYMMDDTHHMMSSZ.nu11vlt (UTC; \
        -2, -3, … if that name exists), the form `n11archive prune` looks for. \
        Portable archives restore anywhere with the password (Argon2id + AES-256-GCM); \
        secure archives keep the vault ciphertext and add AES-256-GCM under a key that \
        never leaves this machine's key store. A portable archive's password is refused \
        if its estimated entropy is under 40 bits (unless --allow-weak-password) and \
        warned about under 60; `n11archive password generate` makes a strong one. \
        Expired fade items are left out. The output appears only when complete; an \
        existing file is replaced only with --force.
        """)

    @OptionGroup var store: StoreOptions
    @OptionGroup var vaultOptions: VaultOptions
    @OptionGroup var password: PasswordOptions
    @OptionGroup var outputOptions: OutputOptions

    @Flag(help: "Restorable anywhere with the password.") var portable = false
    @Flag(help: "Restorable only with this machine's key store.") var secure = false

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("The archive to write.", valueName: "FILE"))
    var output: String?

    @Option(name: .customLong("output-dir"),
            help: ArgumentHelp("Write a new archive named after the current UTC time into DIR (for `prune`).", valueName: "DIR"))
    var outputDirectory: String?

    @Option(help: ArgumentHelp("Compartments to include: vault,fade (default) or backup.", valueName: "LIST"))
    var compartment: String = "vault,fade"

    @Flag(help: "Replace FILE if it exists.") var force = false

    @Flag(name: .customLong("allow-weak-password"),
          help: "Accept a portable-archive password whose estimated entropy is under 40 bits.")
    var allowWeakPassword = false

    @Option(name: .customLong("kdf-ops"), help: ArgumentHelp("Argon2id passes for portable archives (default 3).", valueName: "N"))
    var kdfOps: UInt64 = Argon2Parameters.moderate.opsLimit

    @Option(name: .customLong("kdf-memory"), help: ArgumentHelp("Argon2id memory in MiB for portable archives (default 256).", valueName: "MIB"))
    var kdfMemoryMiB: UInt64 = Argon2Parameters.moderate.memoryBytes >> 20

    func validate() throws {
        guard portable != secure else { throw ValidationError("choose exactly one of --portable and --secure") }
        guard (output == nil) != (outputDirectory == nil) else {
            throw ValidationError("give exactly one of -o FILE and --output-dir DIR")
        }
        if outputDirectory != nil && force { throw ValidationError("--force has no use with --output-dir: dated names never replace anything") }
        let set = try compartments()
        if set.contains(.backup) && set.count > 1 {
            throw ValidationError("the backup compartment is archived on its own: use --compartment backup")
        }
        guard (1...Argon2Parameters.maximumOps).contains(kdfOps), (1...1024).contains(kdfMemoryMiB) else {
            throw ValidationError("--kdf-ops must be 1…32 and --kdf-memory 1…1024 MiB")
        }
    }

    func compartments() throws -> Set<Compartment> {
        var set = Set<Compartment>()
        for name in compartment.split(separator: ",") {
            guard let c = Compartment(rawValue: String(name)) else { throw ValidationError("unknown compartment '\(name)'") }
            set.insert(c)
        }
        guard !set.isEmpty else { throw ValidationError("--compartment needs at least one of vault, fade, backup") }
        return set
    }

    struct Document: Encodable {
        let outcome = "ok", command = "create"
        let archive: String
        let archiveId: String
        let mode: String
        let items: Int
        let plaintextBytes: Int64
        let archiveBytes: Int64
        let skippedExpired: [String]
        let durationSeconds: Double
    }

    func run() throws {
        let kdf = try Argon2Parameters(opsLimit: kdfOps, memoryBytes: kdfMemoryMiB << 20)
        if portable && (kdf.opsLimit < Argon2Parameters.moderate.opsLimit || kdf.memoryBytes < Argon2Parameters.moderate.memoryBytes) {
            Console.warning("Argon2id below the moderate profile (3 passes, 256 MiB) makes the password easier to guess")
        }
        if portable && kdfMemoryMiB > KDFCeiling.standardMemoryMiB {
            Console.warning("Argon2id with \(kdfMemoryMiB) MiB is above the \(KDFCeiling.standardMemoryMiB) MiB that verify, list, restore and prune accept by default: they will need --allow-kdf-memory \(kdfMemoryMiB)")
        }
        let vault = try vaultOptions.open(with: store, forWriting: true)
        let now = Date()
        var directoryLock: DirectoryLock? = nil
        let path: String
        if let outputDirectory {
            // Held shared while writing, so a `prune` of this directory waits for us.
            directoryLock = try DirectoryLock.acquire(try DatedArchive.existingDirectory(outputDirectory), exclusive: false,
                                                      waitSeconds: vaultOptions.lockWait)
            path = try DatedArchive.freePath(in: outputDirectory, at: now)
        } else {
            path = output ?? ""
        }
        let report = try ArchiveCreator.create(from: vault, .init(mode: portable ? .portable : .secure, compartments: try compartments(),
                                                                  output: path, replaceExisting: force, kdf: kdf, now: now),
                                               progress: outputOptions.observer("create")) {
            // Checked after reading and before anything is written (ArchiveCreator asks for
            // the password before it creates the output).
            let secret = try password.read(confirm: true)
            try WeakPasswordPolicy.check(secret, allowWeak: allowWeakPassword)
            return secret
        }
        withExtendedLifetime(directoryLock) {}
        if outputOptions.json {
            try Console.json(Document(archive: report.path, archiveId: report.archiveID, mode: report.mode.rawValue, items: report.items,
                                      plaintextBytes: report.plaintextBytes, archiveBytes: report.archiveBytes,
                                      skippedExpired: report.skippedExpired, durationSeconds: Output.durationSeconds))
            return
        }
        if !report.skippedExpired.isEmpty { Console.note("left out \(report.skippedExpired.count) expired fade item(s)") }
        Console.summary("created \(report.path): \(report.mode.rawValue), \(report.items) item(s), \(Console.byteCount(report.plaintextBytes)) of content, archive \(report.archiveID)")
    }
}

/// Dated names for `create --output-dir` (see ArchiveRetention.fileName).
enum DatedArchive {
    /// The directory, which must exist: a mistyped path in a timer unit should fail, not
    /// quietly start a new backup directory. The message says which role it has (create
    /// writes to it, prune deletes from it) and whether it is missing or not a directory.
    static func existingDirectory(_ directory: String, forPrune: Bool = false) throws -> String {
        let status = (try? FileStatus.of(directory, followLinks: true)) ?? nil
        if status?.kind == .directory { return directory }
        let role = forPrune ? "the archive directory" : "the output directory"
        let consequence = forPrune ? "nothing was deleted" : "nothing was written"
        if status == nil {
            throw CLIError(.missingInput, "\(role) '\(directory)' does not exist; \(consequence)",
                           hint: forPrune ? "give the directory that `create --output-dir` writes to"
                                          : "create it first (mkdir -p '\(directory)'), or fix the path")
        }
        throw CLIError(.missingInput, "\(role) '\(directory)' is not a directory; \(consequence)",
                       hint: forPrune ? "give the directory that `create --output-dir` writes to, not a file in it"
                                      : "give a directory (the archive's name is chosen for you), or use -o FILE")
    }

    /// The first free name for `date`: the bare timestamp, then -2, -3, …. A name taken
    /// between this check and the publish is still never overwritten (create refuses, 73).
    static func freePath(in directory: String, at date: Date) throws -> String {
        for attempt in 1...1000 {
            let candidate = Path.join(directory, ArchiveRetention.fileName(for: date, attempt: attempt))
            if (try FileStatus.of(candidate)) == nil { return candidate }
        }
        throw CLIError(.outputExists, "1000 archives named for \(ArchiveRetention.fileName(for: date)) already exist in '\(directory)'; nothing was written",
                       hint: "prune the directory or write somewhere else")
    }
}

/// What every command that reads an archive shares: which archive, and how to unlock it.
struct ArchiveInput: ParsableArguments {
    @Argument(help: ArgumentHelp("The archive.", valueName: "FILE")) var file: String
    @OptionGroup var store: StoreOptions
    @OptionGroup var password: PasswordOptions
    @OptionGroup var kdfCeiling: KDFCeilingOptions

    /// Opens and authenticates the archive: portable ones ask for the password, secure ones
    /// load the key store. Pass a reader already opened to avoid opening the file twice.
    func unlock(_ opened: ArchiveReader? = nil) throws -> (UnlockedArchive, KeyStore?) {
        let reader = try opened ?? ArchiveReader(path: file)
        var keyStore: KeyStore? = nil
        let archive = try reader.unlock(password: { try password.read(confirm: false, cost: reader.header.kdf) }, keyStore: {
            let loaded = try store.loadKeyStore()
            keyStore = loaded
            return loaded
        }, kdfCeiling: try kdfCeiling.ceiling())
        return (archive, keyStore)
    }
}

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check every tag, size and digest of an archive, writing nothing.",
        discussion: """
        Examples:
          n11archive verify vault.nu11vlt --password-file ~/.n11pass
          n11archive verify nightly.nu11vlt     # secure: this machine's key store
        Exit status 0 only if the whole archive is sound.
        """)

    @OptionGroup var input: ArchiveInput
    @OptionGroup var outputOptions: OutputOptions

    struct Document: Encodable {
        let outcome = "ok", command = "verify"
        let archive: String
        let archiveId: String
        let mode: String
        let items: Int
        let plaintextBytes: Int64
        let durationSeconds: Double
    }

    func run() throws {
        let (archive, unlockedStore) = try input.unlock()
        let keyStore = archive.header.mode == .secure ? try unlockedStore ?? input.store.loadKeyStore() : nil
        let report = try ArchiveVerifier.verify(archive, keyStore: keyStore, progress: outputOptions.observer("verify"))
        if outputOptions.json {
            try Console.json(Document(archive: input.file, archiveId: archive.header.archiveIDHex, mode: archive.header.mode.rawValue,
                                      items: report.items, plaintextBytes: report.plaintextBytes, durationSeconds: Output.durationSeconds))
            return
        }
        Console.summary("ok: \(input.file): \(report.items) item(s), \(Console.byteCount(report.plaintextBytes)) verified")
    }
}

struct ListArchive: ParsableCommand {
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

    func validate() throws { Output.configure(json: json, quiet: false) }

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

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show what can be known about an archive without any secret.",
        discussion: "Example:\n  n11archive info vault.nu11vlt")

    @Argument(help: ArgumentHelp("The archive.", valueName: "FILE")) var file: String
    @Flag(help: "Print one JSON document (also on failure).") var json = false

    func validate() throws { Output.configure(json: json, quiet: false) }

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

struct Restore: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Restore an archive into a vault, or export its items as plain files.",
        discussion: """
        Examples:
          n11archive restore vault.nu11vlt          # into this home's vault
          n11archive restore vault.nu11vlt --vault ~/vault2 --dry-run
          n11archive restore vault.nu11vlt --export ~/photos   # plaintext files
        All or nothing: every tag, size and digest is verified and every item staged before any \
        becomes visible; on any failure the destination is left exactly as it was. Items that \
        are already in the vault unchanged are skipped; one that differs stops the restore \
        unless --overwrite. Expired fade items are reported and skipped. On a machine without \
        a key store, restoring a portable archive creates one (like `init`).
        """)

    @OptionGroup var input: ArchiveInput
    @OptionGroup var vaultOptions: VaultOptions
    @OptionGroup var outputOptions: OutputOptions

    @Option(help: ArgumentHelp("Write plaintext files into DIR instead of restoring into a vault.", valueName: "DIR"))
    var export: String?

    @Flag(name: .customLong("dry-run"), help: "Verify and report what would be restored, writing nothing.")
    var dryRun = false

    @Flag(help: "Replace vault items (or export files) that differ from the archive's.")
    var overwrite = false

    func validate() throws {
        if export != nil && vaultOptions.vault != nil { throw ValidationError("--export and --vault exclude each other") }
    }

    struct Document: Encodable {
        let outcome = "ok", command = "restore"
        let archive: String
        let archiveId: String
        let mode: String
        /// "vault" or "export".
        let target: String
        let destination: String
        let dryRun: Bool
        let items: Int
        let plaintextBytes: Int64
        let restored: [String]
        let replaced: [String]
        let repaired: [String]
        let skippedIdentical: [String]
        let skippedExpired: [String]
        let createdKeyStore: Bool
        let durationSeconds: Double
    }

    var options: RestoreOptions { RestoreOptions(overwrite: overwrite, dryRun: dryRun) }

    func run() throws {
        let reader = try ArchiveReader(path: input.file)
        let report: ArchiveRestorer.Report
        var createdKeyStore = false
        if let export {
            try ArchiveExporter.checkDestination(export)
            let (archive, keyStore) = try input.unlock(reader)
            report = try ArchiveExporter.export(archive, to: export, keyStore: keyStore, options,
                                                progress: outputOptions.observer(dryRun ? "check" : "export"))
        } else {
            let restored = try HomeRestorer.restore({ try input.unlock(reader) },
                                                    into: .init(home: input.store.resolvedHome,
                                                                vaultPath: vaultOptions.path(with: input.store),
                                                                lockWait: vaultOptions.lockWait,
                                                                loadKeyStore: { try input.store.loadKeyStore() }),
                                                    options, progress: outputOptions.observer(dryRun ? "check" : "restore"))
            report = restored.restore
            if let created = restored.createdKeyStore {
                createdKeyStore = true
                Console.note("no key store was in '\(input.store.resolvedHome.root)': created \(created) for the restored vault")
            }
        }
        if outputOptions.json {
            try Console.json(Document(archive: input.file, archiveId: reader.header.archiveIDHex, mode: reader.header.mode.rawValue,
                                      target: export == nil ? "vault" : "export", destination: report.destination, dryRun: dryRun,
                                      items: report.restored.count + report.replaced.count + report.repaired.count,
                                      plaintextBytes: report.plaintextBytes, restored: report.restored, replaced: report.replaced,
                                      repaired: report.repaired, skippedIdentical: report.skippedIdentical,
                                      skippedExpired: report.skippedExpired, createdKeyStore: createdKeyStore,
                                      durationSeconds: Output.durationSeconds))
            return
        }
        let verb = dryRun ? "would restore" : "restored"
        if !report.skippedExpired.isEmpty { Console.note("skipped \(report.skippedExpired.count) expired fade item(s)") }
        if !report.skippedIdentical.isEmpty { Console.note("skipped \(report.skippedIdentical.count) item(s) already in the vault") }
        if !report.repaired.isEmpty { Console.note("repaired \(report.repaired.count) damaged item(s) from the archive") }
        Console.summary("\(verb) \(report.restored.count + report.replaced.count + report.repaired.count) item(s)\(report.replaced.isEmpty ? "" : " (\(report.replaced.count) replaced)"), \(Console.byteCount(report.plaintextBytes)) into \(report.destination)")
    }
}
