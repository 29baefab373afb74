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
          n11archive verify --as-written nightly.nu11vlt   # no key needed
        Exit status 0 only if the whole archive is sound. With --as-written nothing is \
        decrypted: the archive's size and SHA-256 are compared with what `create` recorded \
        in this home when it wrote it, which is all a machine that makes archives for \
        recipients can check (and what `prune` checks there).
        """)

    @OptionGroup var input: ArchiveInput
    @Argument(help: ArgumentHelp("More archives, checked the same way in order (a shell glob: verify --as-written ~/backups/n11archive-*.nu11vlt); the first that fails ends the run with its exit status.",
                                 valueName: "FILE"), completion: .file())
    var moreFiles: [String] = []
    @OptionGroup var outputOptions: OutputOptions

    @Flag(name: .customLong("as-written"),
          help: "Check only that the archive is byte for byte what this home's `create` wrote (size and SHA-256); needs no key.")
    var asWritten = false

    @Flag(help: "After a full verify, record each archive as written by this home, so that prune here counts it (after a disaster: a new home taking its old archives back). Only for archives you know are yours.")
    var adopt = false

    func validate() throws {
        if adopt && asWritten { throw ValidationError("--adopt verifies in full and then records; it cannot go with --as-written") }
    }

    struct WrittenDocument: Encodable {
        let outcome = "ok", command = "verify"
        let archive: String
        let archiveId: String
        let asWritten = true
        let archiveBytes: Int64
        let sha256: String
        let durationSeconds: Double
    }

    struct Document: Encodable {
        let outcome = "ok", command = "verify"
        let archive: String
        let archiveId: String
        let mode: String
        let items: Int
        let plaintextBytes: Int64
        let durationSeconds: Double
    }

    /// Several archives in one `--json` document.
    struct ManyDocument: Encodable {
        let outcome = "ok", command = "verify"
        let archives: [AnyDocument]
        let durationSeconds: Double
    }

    enum AnyDocument: Encodable {
        case written(WrittenDocument), full(Document)
        func encode(to encoder: Encoder) throws {
            switch self {
            case .written(let d): try d.encode(to: encoder)
            case .full(let d): try d.encode(to: encoder)
            }
        }
    }

    func run() throws {
        let files = [input.file] + moreFiles
        // The password, key store and identities, read once for every archive.
        let secrets = try input.unlockSources()
        var documents: [AnyDocument] = []
        for file in files {
            var one = input
            one.file = file
            documents.append(try verify(one, quietJSON: files.count > 1, secrets: secrets))
        }
        if outputOptions.json && files.count > 1 {
            try Console.json(ManyDocument(archives: documents, durationSeconds: Output.durationSeconds))
        }
    }

    /// Checks one archive; prints its line (or, alone with --json, its document).
    private func verify(_ input: ArchiveInput, quietJSON: Bool, secrets: UnlockSources) throws -> AnyDocument {
        if asWritten {
            let reader = try input.reader(progress: outputOptions.observer("download"))
            let record = try WrittenArchives.check(reader.path, name: reader.name, in: input.store.resolvedHome)
            input.releaseFetchedCopy(of: reader)
            let document = WrittenDocument(archive: input.file, archiveId: record.archiveID, archiveBytes: record.size,
                                           sha256: record.sha256, durationSeconds: Output.durationSeconds)
            if outputOptions.json {
                if !quietJSON { try Console.json(document) }
            } else {
                Console.summary("ok: \(input.file) is byte for byte the archive this machine wrote (\(Console.byteCount(record.size)), SHA-256 \(record.sha256.prefix(16))…); its content was not decrypted")
            }
            return .written(document)
        }
        // Read as it downloads, but for --adopt, whose record is of the whole file's state.
        let (reader, arriving) = adopt ? (try input.reader(progress: outputOptions.observer("download")), nil)
            : try input.readerAsItArrives(salvaging: false, progress: outputOptions.observer("download"))
        defer { arriving?.cancel() }
        if let arriving { return try arriving.reportingItsFailure { try verifyFully(input, reader, quietJSON: quietJSON, secrets: secrets) } }
        return try verifyFully(input, reader, quietJSON: quietJSON, secrets: secrets)
    }

    private func verifyFully(_ input: ArchiveInput, _ reader: ArchiveReader, quietJSON: Bool, secrets: UnlockSources) throws -> AnyDocument {
        let before = try FileStatus.of(reader.path, followLinks: true)
        let (archive, unlockedStore) = try input.unlock(reader, sources: secrets)
        let keyStore = archive.header.mode == .secure ? try unlockedStore ?? input.store.loadKeyStore() : nil
        let report = try ArchiveVerifier.verify(archive, keyStore: keyStore, progress: outputOptions.observer("verify"))
        if adopt, let before {
            if try WrittenArchives.adopt(archive.reader, location: input.file, verifiedAs: before, in: input.store.resolvedHome) != nil {
                Console.note("recorded \(input.file) as written by this home: prune here counts it")
            } else {
                Console.note("\(input.file): this home has a record of archive \(archive.header.archiveIDHex) already; kept as it is")
            }
        }
        input.releaseFetchedCopy(of: reader)
        let document = Document(archive: input.file, archiveId: archive.header.archiveIDHex, mode: archive.header.mode.rawValue,
                                items: report.items, plaintextBytes: report.plaintextBytes, durationSeconds: Output.durationSeconds)
        if outputOptions.json {
            if !quietJSON { try Console.json(document) }
        } else {
            Console.summary("ok: \(input.file): \(report.items) item(s), \(Console.byteCount(report.plaintextBytes)) verified")
        }
        return .full(document)
    }
}
