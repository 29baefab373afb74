import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11Vault

struct Verify: ParsableCommand, HasOutputOptions {
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
