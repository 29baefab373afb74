import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11Vault

struct Create: ParsableCommand, HasOutputOptions {
    static let configuration = CommandConfiguration(
        abstract: "Back the vault up into an encrypted .nu11vlt archive.",
        usage: "n11archive create --portable|--secure (-o FILE | --output-dir DIR) [--compartment NAME]… [<options>]",
        discussion: """
        Examples:
          n11archive create --portable -o vault.nu11vlt   # asks for a password twice
          n11archive create --portable -o vault.nu11vlt --password-file ~/.n11pass
          n11archive create --secure -o nightly.nu11vlt --force   # this machine only
          n11archive create --secure --compartment backup -o backup.nu11vlt
          n11archive create --secure --all-compartments -o everything.nu11vlt
          n11archive create --portable --output-dir ~/backups --password-file pw
          n11archive create --portable --recipient backup.pub --output-dir ~/backups
          n11archive create --portable -o - --password-file pw | ssh h 'cat > a'
        With --output-dir DIR the archive is named n11archive-YYYYMMDDTHHMMSSZ.nu11vlt (UTC; \
        -2, -3, ... if that name exists), the form `n11archive prune` looks for. \
        Portable archives restore anywhere with the password (Argon2id + AES-256-GCM) or, \
        with --recipient, with the private key of any recipient (P-256, Apple's ECIES); \
        with recipients only, no password is asked, so a nightly job holds no secret that \
        opens its own archives. A password is added to recipients when a --password-* \
        source is given. \
        secure archives keep the vault ciphertext and add AES-256-GCM under a key that \
        never leaves this machine's key store. A portable archive's password is refused \
        if its estimated entropy is under 40 bits (unless --allow-weak-password) and \
        warned about under 60; `n11archive password generate` makes a strong one. \
        By default the vault and fade compartments are archived, not backup: each create \
        says how many items it left out that way (a warning unless --compartment was given). \
        Expired fade items are left out. The output appears only when complete; an \
        existing file is replaced only with --force.
        """)

    @OptionGroup var store: StoreOptions
    @OptionGroup var vaultOptions: VaultOptions
    @OptionGroup var password: PasswordOptions
    @OptionGroup var recipients: RecipientOptions
    @OptionGroup var outputOptions: OutputOptions

    /// Optional to the parser, required by `validate`: a mistyped flag (`--portabel`) is
    /// then reported as what it is, not as a missing mode.
    @Flag var chosenMode: ArchiveMode?
    var mode: ArchiveMode { chosenMode ?? .portable }

    @Option(name: [.short, .customLong("output")], help: ArgumentHelp("The archive to write.", valueName: "FILE"), completion: .file())
    var output: String?

    @Option(name: .customLong("output-dir"),
            help: ArgumentHelp("Write a new archive named after the current UTC time into DIR (for `prune`).", valueName: "DIR"), completion: .directory)
    var outputDirectory: String?

    @Option(help: ArgumentHelp("A compartment to include (repeatable): vault and fade by default.", valueName: "NAME"))
    var compartment: [Compartment] = []

    @Flag(name: .customLong("all-compartments"), help: "Include every compartment: vault, fade and backup.")
    var allCompartments = false

    @Flag(help: "Replace FILE if it exists; with -o -, write to a terminal.") var force = false

    @Option(help: ArgumentHelp("For a REMOTE:PATH output: where the archive is made and checked before it is uploaded (default: HOME/spool, 0700).",
                               valueName: "DIR"), completion: .directory)
    var spool: String?

    @Flag(name: .customLong("keep-local"), help: "For a REMOTE:PATH output: keep the spooled copy after the upload.")
    var keepLocal = false

    @Flag(name: .customLong("allow-weak-password"),
          help: "Accept a portable-archive password whose estimated entropy is under 40 bits.")
    var allowWeakPassword = false

    @Option(name: .customLong("kdf-ops"), help: ArgumentHelp("Argon2id passes for portable archives.", valueName: "N"))
    var kdfOps: UInt64 = Argon2Parameters.moderate.opsLimit

    @Option(name: .customLong("kdf-memory"), help: ArgumentHelp("Argon2id memory in MiB for portable archives.", valueName: "MIB"))
    var kdfMemoryMiB: UInt64 = Argon2Parameters.moderate.memoryBytes >> 20

    @Option(name: .customLong("format-version"),
            help: ArgumentHelp("The archive format to write: 3 (packed items, any number of them) or 2 (which n11archive 0.2 also reads).",
                               valueName: "N"))
    var formatVersion: Int = ArchiveHeader.currentVersion

    @Flag(help: "With --output-dir: hold only what the archives already there (this home's, by its record) do not; the manifest still lists every item.")
    var incremental = false

    @Option(name: .customLong("full-every"),
            help: ArgumentHelp("With --incremental: make a full archive when the oldest archive a night would need is older than this (30d; days, or 12h).",
                               valueName: "AGE"))
    var fullEvery: String = "30d"

    @Flag(name: .customLong("skip-if-unchanged"), help: "With --incremental: write nothing on a night when nothing changed.")
    var skipIfUnchanged = false

    /// `--full-every` in seconds.
    var fullEverySeconds: TimeInterval? {
        let unit: Double = fullEvery.hasSuffix("h") ? 3600 : 86_400
        let number = fullEvery.hasSuffix("h") || fullEvery.hasSuffix("d") ? String(fullEvery.dropLast()) : fullEvery
        return Double(number).flatMap { $0 > 0 ? $0 * unit : nil }
    }

    func validate() throws {
        guard chosenMode != nil else {
            // The parser runs this before it reports unknown options: name a mistyped mode.
            if let typo = CommandLine.arguments.first(where: { word in
                word.hasPrefix("--") && ["--portable", "--secure"].contains { Suggestion.distance(word, $0) <= 2 }
            }), let meant = Suggestion.closest(to: typo, among: ["--portable", "--secure"]) {
                throw ValidationError("unknown option '\(typo)'; did you mean '\(meant)'?")
            }
            throw ValidationError("give --portable (restores anywhere, with a password or a recipient's key) or --secure (restores only on this machine)")
        }
        guard [2, 3].contains(formatVersion) else {
            throw ValidationError("--format-version is 3 (the default) or 2 (which n11archive 0.2 also reads), not \(formatVersion)")
        }
        if chosenMode == .secure && password.flagGiven {
            throw ValidationError("a secure archive is sealed with this machine's key store and takes no password: drop the password option, or use --portable")
        }
        if output == "-" && Terminal.isTerminal(1) && !force {
            throw ValidationError("-o - writes the archive to standard output, which is a terminal: redirect it (> FILE, | ssh …), or pass --force")
        }
        if let output, output != "-", !ArchiveStores.isRemote(output), output.hasSuffix("/") || ((try? FileStatus.of(output, followLinks: true))??.kind == .directory) {
            throw ValidationError("'\(output)' is a directory: give a file name (-o \(Path.join(Path.withoutTrailingSlashes(output), "vault.nu11vlt"))), or --output-dir \(output) for a dated name")
        }
        // On a remote, `REMOTE:DIR/` (or `REMOTE:`) names a directory too: taken as a file it
        // published DIR/DIR.
        if let output, let meant = ArchiveStores.remoteDirectory(output, suggesting: "vault.nu11vlt") {
            throw ValidationError("'\(output)' is a directory: give a file name (-o \(meant)), or --output-dir \(output) for a dated name")
        }
        guard (output == nil) != (outputDirectory == nil) else {
            throw ValidationError("give exactly one of -o FILE and --output-dir DIR")
        }
        if outputDirectory != nil && force { throw ValidationError("--force has no use with --output-dir: dated names never replace anything") }
        if incremental && outputDirectory == nil {
            throw ValidationError("--incremental needs --output-dir DIR (or REMOTE:DIR): the archives it builds on must lie beside it")
        }
        if incremental && formatVersion < 3 { throw ValidationError("--incremental needs format version 3") }
        if !incremental && (skipIfUnchanged || CommandLine.arguments.contains(where: { $0.hasPrefix("--full-every") })) {
            throw ValidationError("--full-every and --skip-if-unchanged go with --incremental")
        }
        guard fullEverySeconds != nil else { throw ValidationError("--full-every takes days (30d, or 30) or hours (12h), not '\(fullEvery)'") }
        let remote = (outputDirectory ?? output).map(ArchiveStores.isRemote) ?? false
        if remote && force { throw ValidationError("--force is not available for a remote output: an archive there is never replaced") }
        if !remote && (keepLocal || (spool != nil && output != "-")) {
            throw ValidationError("--spool and --keep-local are for a REMOTE:PATH output (and --spool for -o -)")
        }
        if output == "-" && outputOptions.json { throw ValidationError("-o - puts the archive on standard output, so --json cannot go there too") }
        if allCompartments && !compartment.isEmpty { throw ValidationError("--all-compartments and --compartment exclude each other") }
        if mode == .secure && !recipients.isEmpty {
            throw ValidationError("--recipient makes a portable archive: a secure one opens only with this machine's key store")
        }
        guard (1...Argon2Parameters.maximumOps).contains(kdfOps), (1...1024).contains(kdfMemoryMiB) else {
            throw ValidationError("--kdf-ops must be 1…32 and --kdf-memory 1…1024 MiB")
        }
    }

    var compartments: Set<Compartment> {
        allCompartments ? Set(Compartment.allCases) : compartment.isEmpty ? [.vault, .fade] : Set(compartment)
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
        /// Live items of the compartments this archive does not include, per compartment.
        let leftOutCompartments: [String: Int]
        /// For a REMOTE:PATH output: how the archive was uploaded and checked.
        let upload: Upload?
        /// The fingerprint of the home's signing key that signed it; nil: not signed.
        let signedBy: String?
        /// The archives a restore of this one also reads (empty: a full archive), and what
        /// this one holds itself.
        let dependsOn: [String]
        let newItems: Int
        let newBytes: Int64
        /// Version 3: the manifest's pages, and of them those earlier archives hold.
        let manifestPages: Int
        let pagesReused: Int
        let durationSeconds: Double
    }

    /// An unchanged night skipped (`--skip-if-unchanged`).
    struct UnchangedDocument: Encodable {
        let outcome = "ok", command = "create"
        let unchanged = true
        let directory: String
        let durationSeconds: Double
    }

    struct Upload: Encodable {
        let remote: String
        let bytes: Int64
        /// `sha256`, `sha1`, `md5` (the remote's own hash) or `read-back`.
        let checkedBy: String
        /// What the upload took after the archive was complete (with `streamed`, the rest went
        /// up while it was written).
        let seconds: Double
        let streamed: Bool
        let keptLocal: String?
    }

    func run() throws {
        // Read before the vault is opened: a mistyped key file fails fast, and with nothing held.
        let recipientKeys = try recipients.keys()
        // With recipients, a password slot only when a password source is named explicitly
        // (a terminal alone does not count: the point is an archive that needs no secret).
        let withPassword = recipientKeys.isEmpty || password.explicitSource != nil
        let kdf = try Argon2Parameters(opsLimit: kdfOps, memoryBytes: kdfMemoryMiB << 20)
        if mode == .portable && withPassword && (kdf.opsLimit < Argon2Parameters.moderate.opsLimit || kdf.memoryBytes < Argon2Parameters.moderate.memoryBytes) {
            Console.warning("Argon2id below the moderate profile (3 passes, 256 MiB) makes the password easier to guess")
        }
        if mode == .portable && withPassword && kdfMemoryMiB > KDFCeiling.standardMemoryMiB {
            Console.warning("Argon2id with \(kdfMemoryMiB) MiB is above the \(KDFCeiling.standardMemoryMiB) MiB that verify, list, restore and prune accept by default: they will need --allow-kdf-memory \(kdfMemoryMiB)")
        }
        let vault = try vaultOptions.open(with: store, forWriting: true)
        if formatVersion >= 3 && vault.keyStore.signingKey == nil {
            Console.note("this home has no signing key, so the archive is not signed; make one with `n11archive key generate --signing`")
        }
        if formatVersion < 3 && vault.keyStore.signingKey != nil {
            Console.note("format version \(formatVersion) has no signatures: this archive is not signed, and where a signer is trusted it is refused")
        }
        var request = ArchiveBackup.Request(mode: mode, compartments: compartments, kdf: kdf, destination: try destination(),
                                            home: store.resolvedHome, formatVersion: formatVersion)
        if incremental, let seconds = fullEverySeconds {
            request.incremental = .init(fullEvery: seconds, skipIfUnchanged: skipIfUnchanged)
        }
        if let average = Output.pageAverage { request.pageAverage = average }
        // Who it opens for: a change between nights makes a full archive (one restore, one set of keys).
        // (And who signs: a chain whose older nights another key signed, or none did, would
        // be refused where the new signer is trusted.)
        request.access = (recipientKeys.map(KeyFiles.fingerprint).sorted() + (withPassword ? ["password"] : [])
                          + (vault.keyStore.signingKey.map { ["signer:" + SignerKeyFiles.fingerprint($0.publicKey)] } ?? [])).joined(separator: ",")
        let backup = try ArchiveBackup.run(from: vault, request, progress: outputOptions.observer("create")) {
            // Asked after the vault was read and before anything is written.
            var passwords: [SecureBytes] = []
            if withPassword {
                let secret = try password.read(confirm: true)
                try WeakPasswordPolicy.check(secret, allowWeak: allowWeakPassword)
                passwords.append(secret)
            }
            return ArchiveAccess(passwords: passwords, recipients: recipientKeys, kdf: kdf)
        }
        try render(backup, recipients: recipientKeys.count, withPassword: withPassword)
    }

    /// The left-out compartments (every time, even with --quiet), then the JSON document or
    /// the summary line.
    private func render(_ backup: ArchiveBackup.Report, recipients: Int, withPassword: Bool) throws {
        if let why = backup.fullBecause { Console.note("a full archive: \(why)") }
        if let problem = backup.recordProblem {
            Console.warning("the archive is published, but the record of what was shipped could not be kept (\(problem)); the next incremental night builds on the one before")
        }
        guard let report = backup.archive else {
            if outputOptions.json {
                try Console.json(UnchangedDocument(directory: backup.location, durationSeconds: Output.durationSeconds))
            } else {
                Console.summary("unchanged since the last archive in \(backup.location): nothing written (--skip-if-unchanged)")
            }
            return
        }
        // The default leaves the backup compartment out: say so every time, even with
        // --quiet (a nightly job would otherwise never back those items up, unnoticed).
        for (left, count) in backup.leftOut.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            let message = "\(count) item(s) in the \(left.rawValue) compartment are not in this archive; add --all-compartments to include them (--compartment \(left.rawValue) alone would archive only those)"
            if compartment.isEmpty && !allCompartments { Console.warning(message) } else { Console.note(message) }
        }
        if outputOptions.json {
            let upload = backup.upload.map { Upload(remote: backup.location, bytes: $0.bytes, checkedBy: $0.checkedBy,
                                                    seconds: $0.seconds, streamed: $0.whileWritten, keptLocal: $0.keptLocal) }
            try Console.json(Document(archive: backup.location, archiveId: report.archiveID, mode: report.mode.rawValue, items: report.items,
                                       plaintextBytes: report.plaintextBytes, archiveBytes: report.archiveBytes,
                                       skippedExpired: report.skippedExpired,
                                       leftOutCompartments: Dictionary(uniqueKeysWithValues: backup.leftOut.map { ($0.key.rawValue, $0.value) }),
                                       upload: upload, signedBy: report.signer.map(SignerKeyFiles.fingerprint),
                                       dependsOn: report.dependsOn, newItems: report.newItems, newBytes: report.newBytes,
                                       manifestPages: report.manifestPages, pagesReused: report.pagesReused,
                                       durationSeconds: Output.durationSeconds))
            return
        }
        if !report.skippedExpired.isEmpty { Console.note("left out \(report.skippedExpired.count) expired fade item(s)") }
        // With -o - stdout carries the archive: the summary goes to stderr.
        if backup.location == "-" {
            Console.note("wrote to standard output: \(report.mode.rawValue), \(report.items) item(s), \(Console.byteCount(report.archiveBytes)), archive \(report.archiveID)")
            return
        }
        let opens = recipients == 0 ? "" : ", for \(recipients) recipient(s)\(withPassword ? " and a password" : "")"
        let signed = (report.signer.map { ", signed by \(SignerKeyFiles.fingerprint($0))" } ?? "")
            + (report.dependsOn.isEmpty ? "" : "; incremental: \(report.newItems) new item(s), \(Console.byteCount(report.newBytes)), the rest in \(report.dependsOn.count) earlier archive(s)"
                + (report.pagesReused == 0 ? "" : ", as are \(report.pagesReused) of its \(report.manifestPages) manifest pages"))
        Console.summary("created \(backup.location): \(report.mode.rawValue)\(opens), \(report.items) item(s), \(Console.byteCount(report.plaintextBytes)) of content, archive \(report.archiveID)\(signed)")
    }

    /// Where the archive goes: a store (a directory or a remote, `--output-dir`, or
    /// `-o REMOTE:FILE`), standard output, or a file.
    private func destination() throws -> ArchiveBackup.Destination {
        let publishing = PublishOptions(lockWait: vaultOptions.lockWait, keepLocal: keepLocal, progress: outputOptions.observer("upload"),
                                        notice: Self.say)
        if let outputDirectory {
            return .store(try ArchiveStores.open(outputDirectory, spool: spool, home: store.resolvedHome, forPrune: false),
                          name: nil, publishing)
        }
        let output = output ?? ""
        if let (remote, name) = ArchiveStores.remoteFile(output, spool: spool, home: store.resolvedHome) {
            return .store(remote, name: name, publishing)
        }
        if output == "-" { return .standardOutput(spool: try RemoteArchives.spool(spool, home: store.resolvedHome)) }
        return .file(output, replaceExisting: force)
    }

    /// What publishing on a remote tells the user on the way.
    private static func say(_ notice: PublishNotice) {
        switch notice {
        case let .uploading(bytes, final, whileWritten):
            Console.note(whileWritten ? "finishing the upload of \(Console.byteCount(bytes)) to \(final) (it began with the archive)…"
                                      : "uploading \(Console.byteCount(bytes)) to \(final)…")
        case .streamFailed(let reason):
            Console.note("the upload that followed the archive failed (\(reason)); uploading it whole from the spool")
        case let .uploaded(seconds, checkedBy):
            Console.note("uploaded in \(String(format: "%.1f", seconds)) s, checked by \(checkedBy == "read-back" ? "reading it back (the remote keeps no hash)" : "the remote's \(checkedBy.uppercased())")")
        case .keptLocal(let path): Console.note("kept the local copy \(path)")
        case let .keepLocalFailed(path, reason):
            Console.warning("the archive is published, but the local copy could not be kept as '\(path)' (\(reason)); it was removed")
        }
    }
}

extension ArchiveMode: EnumerableFlag {
    public static func help(for value: ArchiveMode) -> ArgumentHelp? {
        switch value {
        case .portable: return "Restorable anywhere with the password."
        case .secure: return "Restorable only with this machine's key store."
        }
    }
}
