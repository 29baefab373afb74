import Foundation
import N11Container
import N11Crypto
import N11Format
import N11System
import N11Vault

/// Builds a `.nu11vlt` archive from a vault (FORMAT.md). The output path holds a complete
/// archive or nothing: the ZIP is written to a temp file in the same directory, fsynced,
/// and only then renamed into place.
public enum ArchiveCreator {
    public struct Request {
        public let mode: ArchiveMode
        public let compartments: Set<Compartment>
        public let output: String
        public let replaceExisting: Bool
        public let kdf: Argon2Parameters
        public let now: Date

        public init(mode: ArchiveMode, compartments: Set<Compartment>, output: String, replaceExisting: Bool,
                    kdf: Argon2Parameters = .moderate, now: Date = Date()) {
            self.mode = mode; self.compartments = compartments; self.output = output
            self.replaceExisting = replaceExisting; self.kdf = kdf; self.now = now
        }
    }

    public struct Report: Sendable {
        public let path: String
        public let archiveID: String
        public let mode: ArchiveMode
        public let items: Int
        public let plaintextBytes: Int64
        public let skippedExpired: [String]
        public let archiveBytes: Int64
    }

    /// `password` is called only in portable mode (after all cheap checks passed).
    /// `progress` counts each item's plaintext as libzip pulls it through.
    public static func create(from vault: Vault, _ request: Request, progress: ArchiveProgress? = nil,
                              password: () throws -> SecureBytes) throws(ArchiveError) -> Report {
        let output = Path.absolute(request.output)
        do {
            if !request.replaceExisting, try FileStatus.of(output) != nil { throw ArchiveError.outputExists(path: output) }
            let outputDirectory = Path.directory(of: output)
            guard try FileStatus.of(outputDirectory, followLinks: true)?.kind == .directory else {
                throw SystemError("no such directory", path: outputDirectory, errno: ENOENT)
            }
            AtomicFile.removeLeftovers(in: outputDirectory)

            // Keys first (FORMAT.md §3–4): Argon2id's memory is the peak of the whole run, so
            // derive it before the catalogue and the ZIP writer hold anything.
            let archiveID = SecureRandom.bytes(16)
            let contentKey = try SecureBytes(randomCount: 32)
            let header: ArchiveHeader
            let kek: SecureBytes
            switch request.mode {
            case .portable:
                let kdf = ArchiveHeader.KDF(opsLimit: request.kdf.opsLimit, memoryKiB: request.kdf.memoryBytes >> 10,
                                            salt: SecureRandom.bytes(Argon2id.saltLength))
                header = try ArchiveHeader(mode: .portable, archiveID: archiveID, created: request.now, kdf: kdf)
                kek = try ArchiveKeys.portableKEK(password: try password(), kdf: kdf)
            case .secure:
                header = try ArchiveHeader(mode: .secure, archiveID: archiveID, created: request.now, kdf: nil)
                kek = try SecureBytes(randomCount: 32)
            }

            // A damaged record would silently be missing from the archive: refuse instead.
            if let id = try vault.damagedItemIDs().first {
                throw ArchiveError.vaultItemDamaged(id: id, path: Path.join(vault.path, "Meta/\(id).n11meta"))
            }
            let all = try vault.items(includeExpired: true, now: request.now).filter { request.compartments.contains($0.compartment) }
            let live = all.filter { !$0.isExpired(at: request.now) }
            let expired = all.filter { $0.isExpired(at: request.now) }.map(\.id)

            let keyWrap = try ArchiveKeys.wrap(contentKey: contentKey, kek: kek, header: header)

            let manifestItems = live.map { item in
                Manifest.Item(id: item.id, kind: ItemKindName(item.kind), compartment: CompartmentName(item.compartment),
                              name: item.name, created: item.created, expires: item.expires, size: item.size,
                              sha256: item.sha256, mode: request.mode)
            }
            // Never write what a reader would refuse (FORMAT.md §8).
            guard manifestItems.count <= FormatLimits.items else {
                throw ArchiveError.tooLarge("\(manifestItems.count) items (at most \(FormatLimits.items))")
            }
            let manifestBytes = try Manifest(header: header, items: manifestItems).serialized()
            guard Int64(manifestBytes.count) <= FormatLimits.manifestBytes else {
                throw ArchiveError.tooLarge("a manifest of \(manifestBytes.count) bytes (at most \(FormatLimits.manifestBytes))")
            }
            let manifestKey = try ArchiveKeys.entryKey(contentKey: contentKey, header: header, entryName: EntryName.manifest)
            let sealedManifest = try ChunkedStream.seal(manifestBytes, key: manifestKey)

            // The ZIP is written straight into this temp name (it carries our PID, so a
            // concurrent create's sweep of dead writers' leftovers leaves it alone).
            let temp = Path.join(outputDirectory, AtomicFile.tempName(for: Path.lastComponent(of: output)))
            defer { unlink(temp) }
            let writer = try ZipWriter(path: temp)
            let mtime = time_t(request.now.timeIntervalSince1970)
            try writer.addEntry(name: EntryName.header, size: Int64(header.bytes.count), modified: mtime) { MemorySource(header.bytes) }
            try writer.addEntry(name: EntryName.keyWrap, size: Int64(keyWrap.count), modified: mtime) { MemorySource(keyWrap) }
            try writer.addEntry(name: EntryName.manifest, size: Int64(sealedManifest.count), modified: mtime) { MemorySource(sealedManifest) }
            progress?.begin(items: live.count, bytes: live.reduce(0) { $0 + $1.size })
            // Vault items are read, checked and re-encrypted on worker threads (as many as
            // there are cores, up to 4; items take turns) while libzip checksums and writes on
            // this one: re-encrypting is the slower half, and items are independent. From
            // `start()` on only the workers touch the vault, and only to read. Each worker
            // derives its entries' keys into its own reused locked buffer: the sealing source
            // copies the key into its cipher context when it is made, before the next one.
            let lanes = max(1, min(ProcessInfo.processInfo.activeProcessorCount, 4))
            let keySlots = try (0..<lanes).map { _ in try SecureBytes(count: 32) }
            let readAhead = ReadAheadLanes(count: live.count, lanes: lanes) { lane in
                { index in
                    try ArchiveKeys.entryKey(contentKey: contentKey, header: header, entryName: manifestItems[index].entry,
                                             into: keySlots[lane])
                    return try itemSource(live[index], vault: vault, mode: request.mode, entryKey: keySlots[lane])
                }
            }
            defer { readAhead.finish() }
            for (index, entry) in manifestItems.enumerated() {
                try writer.addEntry(name: entry.entry, size: entry.sealedSize, modified: mtime) {
                    progress.counting(readAhead.stream(index), size: live[index].size)
                }
            }
            // A secure archive must never exist without its key: store the key first.
            if request.mode == .secure { try vault.keyStore.addArchiveKey(id: archiveID, key: kek) }
            try readAhead.start()
            do { try writer.finish() }
            catch let error as SystemError where error.path == temp {
                // Name the archive the user asked for, not our hidden temp file.
                throw SystemError("cannot write the archive", path: output, errno: error.errno)
            }

            let file = try FileDescriptor.openForReading(temp)
            let size = try file.status().size
            // Encrypted, but still nobody else's business: owner-only like the key store.
            _ = fchmod(file.rawValue, 0o600)
            try file.sync()
            do { try AtomicFile.publish(temp, to: output, replaceExisting: request.replaceExisting) }
            catch let error as SystemError where error.errno == EEXIST { throw ArchiveError.outputExists(path: output) }
            try Directory.sync(outputDirectory)
            progress?.finish()
            return Report(path: output, archiveID: header.archiveIDHex, mode: request.mode, items: live.count,
                          plaintextBytes: live.reduce(0) { $0 + $1.size }, skippedExpired: expired, archiveBytes: size)
        } catch let error as ArchiveError { throw error }
        catch let error as VaultError {
            if case .itemDamaged(let id, let path) = error { throw .vaultItemDamaged(id: id, path: path) }
            throw .vault(error)
        } catch let error as SystemError { throw .system(error) }
        catch let error as ContainerError { throw .system(SystemError(error.description, path: output, errno: EIO)) }
        catch let error as CategorizedError { throw .caller(kind: error.kind, message: error.description, hint: error.hint) }
        catch { throw .system(SystemError("\(error)", path: output, errno: EIO)) }
    }

    /// The sealed entry for one vault item, opened only when libzip starts writing it.
    private static func itemSource(_ item: ItemMetadata, vault: Vault, mode: ArchiveMode, entryKey: SecureBytes) throws -> ByteSource {
        let content = try vault.openContent(of: item)
        let key = vault.keyStore.key(for: item.compartment)
        let digest = [UInt8](hex: item.sha256, length: 32) ?? []
        let sealed: ByteSource
        switch mode {
        case .portable:
            sealed = try Resealing.singleTagToChunked(content, algorithm: .chacha20Poly1305, openKey: key, sealKey: entryKey,
                                                      expectedSHA256: digest, expectedLength: item.size)
        case .secure:
            sealed = try Resealing.wrapSingleTag(content, algorithm: .chacha20Poly1305, innerKey: key, sealKey: entryKey,
                                                 expectedSHA256: digest, expectedLength: item.size)
        }
        return VaultItemErrors(sealed, id: item.id, path: content.path)
    }
}

/// Names the vault item when its content fails a check while the archive is written.
final class VaultItemErrors: ByteSource {
    private let source: ByteSource
    private let id: String
    private let path: String

    init(_ source: ByteSource, id: String, path: String) {
        self.source = source
        self.id = id
        self.path = path
    }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        do { return try source.read(into: &buffer, offset: offset, count: count) }
        catch let error as CryptoError where error.kind == .damaged {
            throw VaultError.itemDamaged(id: id, path: path)
        }
    }
}
