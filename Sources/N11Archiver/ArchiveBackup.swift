import Foundation
import N11Crypto
import N11Format
import N11System
import N11Vault

/// `create`: an archive of the vault's chosen compartments, made and published in one of
/// three places, then recorded as written by this home (`WrittenArchives`), so that `prune`
/// and `verify --as-written` know it. A failure leaves no archive under a final name.
public enum ArchiveBackup {
    public enum Destination {
        /// A file (`-o FILE`); replaced only with `replaceExisting` (`--force`).
        case file(String, replaceExisting: Bool)
        /// A store, under `name` or a free dated name (`--output-dir`, `-o REMOTE:FILE`).
        case store(any ArchiveStore, name: String?, PublishOptions)
        /// Standard output (`-o -`): made whole in `spool` first (a ZIP is written with seeks,
        /// and only a complete, checked archive may leave), then copied out and removed.
        case standardOutput(spool: String)
    }

    public struct Request {
        public let mode: ArchiveMode
        public let compartments: Set<Compartment>
        public let kdf: Argon2Parameters
        public let destination: Destination
        public let home: N11Home
        public let now: Date
        /// 2 or 3 (FORMAT.md §10).
        public let formatVersion: Int
        /// Sign with the home's signing key, if its key store holds one (version 3 only).
        public var sign = true

        public init(mode: ArchiveMode, compartments: Set<Compartment>, kdf: Argon2Parameters, destination: Destination,
                    home: N11Home, now: Date = Date(), formatVersion: Int = ArchiveHeader.currentVersion) {
            self.mode = mode
            self.compartments = compartments
            self.kdf = kdf
            self.destination = destination
            self.home = home
            self.now = now
            self.formatVersion = formatVersion
        }
    }

    public struct Report {
        public let archive: ArchiveCreator.Report
        /// Where it was published (a path or `REMOTE:PATH`), "-" for standard output.
        public let location: String
        public let upload: Publication.Upload?
        /// Live items of the compartments the archive does not include, per compartment.
        public let leftOut: [Compartment: Int]
    }

    /// `access` says who the archive is for (asking for a password if need be); it is called
    /// after the vault was read and before anything is written.
    public static func run(from vault: Vault, _ request: Request, progress: ArchiveProgress?,
                           access: @escaping () throws -> ArchiveAccess) throws -> Report {
        var leftOut: [Compartment: Int] = [:]
        for item in try vault.items(now: request.now) where !request.compartments.contains(item.compartment) {
            leftOut[item.compartment, default: 0] += 1
        }
        func create(at path: String, replaceExisting: Bool = false) throws -> ArchiveCreator.Report {
            var creation = ArchiveCreator.Request(mode: request.mode, compartments: request.compartments, output: path,
                                                  replaceExisting: replaceExisting, kdf: request.kdf, now: request.now,
                                                  formatVersion: request.formatVersion)
            creation.signingKey = request.sign ? vault.keyStore.signingKey : nil
            return try ArchiveCreator.create(from: vault, creation, progress: progress, access: access)
        }
        let report: ArchiveCreator.Report, location: String, upload: Publication.Upload?
        switch request.destination {
        case let .file(path, replaceExisting):
            report = try create(at: path, replaceExisting: replaceExisting)
            (location, upload) = (Path.absolute(report.path), nil)
        case let .store(store, name, options):
            let publication = try store.publishNew(name: name, at: request.now, options) { try create(at: $0) }
            (report, location, upload) = (publication.report, publication.location, publication.upload)
        case .standardOutput(let spool):
            report = try toStandardOutput(spool: spool) { try create(at: $0) }
            (location, upload) = ("-", nil)
        }
        try WrittenArchives.record(report, created: request.now, location: location, in: request.home)
        return Report(archive: report, location: location, upload: upload, leftOut: leftOut)
    }

    private static func toStandardOutput(spool: String, create: (String) throws -> ArchiveCreator.Report) throws -> ArchiveCreator.Report {
        let local = Path.join(spool, AtomicFile.tempName(for: "stdout.nu11vlt"))
        let cleanup = Interruption.onInterrupt { try? FileSystem.removeFile(local) }
        defer {
            try? FileSystem.removeFile(local)
            Interruption.cancel(cleanup)
        }
        let report = try create(local)
        let source = try FileDescriptor.openForReading(local)
        let stdout = FileDescriptor(borrowing: 1, path: "standard output")
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = try source.read(into: &buffer, count: buffer.count)
            if n == 0 { break }
            try stdout.write(buffer[0..<n])
        }
        return report
    }
}
