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
        let reader = try input.reader(progress: outputOptions.observer("download"))
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
