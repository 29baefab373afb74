import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format
import N11System

struct Rekey: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add or remove an archive's passwords and recipients without touching its content.",
        discussion: """
        Examples:
          n11archive rekey a.nu11vlt --add-recipient laptop.pub
          n11archive rekey a.nu11vlt --remove-passwords --add-password
          n11archive rekey a.nu11vlt --remove-passwords --add-password --kdf-ops 4
          n11archive rekey a.nu11vlt --remove-recipients --add-recipient new.pub
        It opens the archive with any one key it has (an identity, or the password), then \
        writes a new header and header MAC and copies the manifest and every item entry \
        byte for byte; the result replaces the archive atomically (or goes to -o OUT). \
        Recipient slots do not say whose key they are for, so recipients are removed all \
        together (--remove-recipients) and the ones to keep added again. The new password \
        comes from --new-password-file/--new-password-fd, or is asked twice on a terminal. \
        A version 1 archive becomes version 2. Secure archives have nothing to rekey. \
        Rekeyed in place, an archive this home wrote gets its record (`verify --as-written`) \
        updated; a copy written with -o does not. A signed archive is signed again with \
        this home's signing key when that key signed it; otherwise rekey refuses, unless \
        --drop-signature makes the result unsigned.
        """)

    @OptionGroup var input: ArchiveInput
    @Option(name: .customLong("add-recipient"), help: ArgumentHelp("Add a slot for the P-256 public key in FILE; repeatable.", valueName: "FILE"), completion: .file())
    var addRecipient: [String] = []
    @Option(name: .customLong("add-recipients-file"), help: ArgumentHelp("Add a slot for every public key in FILE; repeatable.", valueName: "FILE"), completion: .file())
    var addRecipientsFile: [String] = []

    @Flag(name: .customLong("add-password"), help: "Add a password slot (the new password is asked, or read from --new-password-file/--new-password-fd).")
    var addPassword = false
    @Option(name: .customLong("new-password-file"), help: ArgumentHelp("Read the added password from the first line of FILE.", valueName: "FILE"), completion: .file())
    var newPasswordFile: String?
    @Option(name: .customLong("new-password-fd"), help: ArgumentHelp("Read the added password from file descriptor N.", valueName: "N"))
    var newPasswordFD: Int32?
    @Flag(name: .customLong("remove-passwords"), help: "Remove every password slot.") var removePasswords = false
    @Flag(name: .customLong("remove-recipients"), help: "Remove every recipient slot.") var removeRecipients = false
    @Flag(name: .customLong("allow-weak-password"), help: "Accept an added password whose estimated entropy is under 40 bits.")
    var allowWeakPassword = false
    @Option(name: .customLong("kdf-ops"), help: ArgumentHelp("Argon2id passes for the added password.", valueName: "N"))
    var kdfOps: UInt64 = Argon2Parameters.moderate.opsLimit
    @Option(name: .customLong("kdf-memory"), help: ArgumentHelp("Argon2id memory in MiB for the added password.", valueName: "MIB"))
    var kdfMemoryMiB: UInt64 = Argon2Parameters.moderate.memoryBytes >> 20
    @Option(name: .short, help: ArgumentHelp("Write the rekeyed archive to OUT instead of replacing FILE.", valueName: "OUT"))
    var output: String?
    @Flag(help: "Replace OUT if it exists.") var force = false
    @Flag(name: .customLong("drop-signature"), help: "Make a signed archive unsigned (needed when this home's signing key is not its signer).")
    var dropSignature = false

    func validate() throws {
        guard addPassword || removePasswords || removeRecipients || !addRecipient.isEmpty || !addRecipientsFile.isEmpty else {
            throw ValidationError("say what to change: --add-password, --add-recipient FILE, --remove-passwords or --remove-recipients")
        }
        if !addPassword && (newPasswordFile != nil || newPasswordFD != nil) {
            throw ValidationError("--new-password-file/--new-password-fd need --add-password")
        }
        guard (1...Argon2Parameters.maximumOps).contains(kdfOps), (1...1024).contains(kdfMemoryMiB) else {
            throw ValidationError("--kdf-ops must be 1…32 and --kdf-memory 1…1024 MiB")
        }
    }

    func run() throws {
        if ArchiveStores.isRemote(input.file) {
            throw CLIError(.usage, "rekey works on a local archive; '\(input.file)' is on a remote",
                           hint: "fetch it (rclone copyto \(input.file) a.nu11vlt), rekey it, and send it back under a new name")
        }
        let kdf = try Argon2Parameters(opsLimit: kdfOps, memoryBytes: kdfMemoryMiB << 20)
        let added = try RecipientOptions.keys(in: addRecipient + addRecipientsFile)
        let reader = try input.reader()
        // A signed archive is signed again by this home's signing key, which must be its
        // signer: known from the header, so refused before any password or key work.
        var signingKey: Ed25519SigningKey? = nil
        if let signer = reader.signer, !dropSignature {
            let hasKeyStore = ((try? FileStatus.of(input.store.resolvedHome.keyStorePath)) ?? nil) != nil
            signingKey = hasKeyStore ? try input.store.loadKeyStore().signingKey : nil
            guard signingKey?.publicKey == signer else {
                throw ArchiveError.signedElsewhere(archive: input.file, signer: SignerKeyFiles.fingerprint(signer))
            }
        }
        if dropSignature, reader.signer != nil, try input.trust.resolve(home: input.store.resolvedHome).isActive {
            Console.warning("this home trusts signers: once unsigned, '\(input.file)' is refused here (read it with --no-signer-check)")
        }
        let sources = try input.unlockSources()
        let (archive, _) = try input.unlock(reader, sources: sources)
        var passwords: [SecureBytes] = []
        if addPassword {
            guard let source = SecretSource.choose(file: newPasswordFile, descriptor: newPasswordFD, environmentFile: "N11_NEW_PASSWORD_FILE") else {
                throw CLIError(.usage, "--add-password needs a terminal to ask for the new password, or --new-password-file/--new-password-fd")
            }
            let secret = try source.read(what: "new password", confirm: true)
            // The password it was just opened with, added again: a second slot of the same
            // password, which only costs readers a derivation more (--remove-passwords first
            // rewraps it, under new Argon2id settings say).
            if !removePasswords, sources.hasPassword, let current = try sources.password(cost: nil), current.constantTimeEquals(secret) {
                throw CLIError(.usage, "'\(input.file)' already opens with that password; nothing was changed",
                               hint: "to give it new Argon2id settings, add it with --remove-passwords (which drops the old password slots)")
            }
            try WeakPasswordPolicy.check(secret, allowWeak: allowWeakPassword)
            passwords.append(secret)
        }
        // An archive this home wrote keeps counting as written here (prune, --as-written); a
        // copy of it does not take over its record.
        let recorded = output == nil ? try WrittenArchives.record(describing: archive.reader.path, in: input.store.resolvedHome) : nil
        let report = try ArchiveRekeyer.rekey(archive, .init(add: ArchiveAccess(passwords: passwords, recipients: added, kdf: kdf),
                                                              removePasswords: removePasswords, removeRecipients: removeRecipients,
                                                              signingKey: signingKey, dropSignature: dropSignature),
                                              output: output, replaceExisting: force)
        if let recorded { try WrittenArchives.rerecord(report.output, replacing: recorded, in: input.store.resolvedHome) }
        let counts = Dictionary(grouping: report.slots, by: { $0 }).mapValues(\.count)
        let described = [("password", "password"), ("p256", "recipient")].compactMap { key, word in
            counts[key].map { "\($0) \(word)\($0 == 1 ? "" : "s")" }
        }.joined(separator: " and ")
        let signed = report.signer.map { ", signed again by \(SignerKeyFiles.fingerprint($0))" } ?? (archive.header.signer != nil ? ", no longer signed" : "")
        Console.summary("rekeyed \(report.output): opens with \(described); \(report.copiedEntries) entries copied unchanged\(signed)")
        // An incremental archive's restore reads the archives it depends on, each with its own
        // slots: a password added here alone does not open the chain.
        let dependencies = archive.header.dependsOn
        if !dependencies.isEmpty {
            let shown = dependencies.prefix(4).map { String($0.hex.prefix(8)) }.joined(separator: ", ") + (dependencies.count > 4 ? ", …" : "")
            Console.warning("'\(input.file)' is incremental: a restore of it also reads the \(dependencies.count) archive(s) it depends on (\(shown)), "
                            + "which keep their own passwords and recipients; rekey each of them the same way (`n11archive archives DIR` shows their IDs)")
        }
        // Password slots whose Argon2id work together is above what readers spend by default.
        let work = KDFCeiling.work(of: try ArchiveReader(path: report.output).header)
        if work > KDFCeiling.standard.workMiBPasses {
            let memory = (work + KDFCeiling.passesAtCeiling - 1) / KDFCeiling.passesAtCeiling
            Console.warning("its password slots together ask for \(work) MiB × passes of Argon2id, above the \(KDFCeiling.standard.workMiBPasses) that verify, list, restore and prune spend by default: they will need --allow-kdf-memory \(memory)")
        }
    }
}
