import Foundation
import N11Container
import N11Crypto
import N11Format
import N11System

/// Changes who can open a portable archive without touching its content (FORMAT.md §4):
/// the content key and archive ID stay, so the manifest and every item entry are copied
/// byte for byte; only `header.json` (its slots) and `header.mac` are written anew. The
/// result replaces the archive (or is written to another path) atomically. A version 1
/// archive becomes version 2, its password a password slot with the same `kdf` (salt and
/// cost), so it opens with the same password unless the change removes passwords.
public enum ArchiveRekeyer {
    public struct Change {
        public var add: ArchiveAccess
        public var removePasswords: Bool
        public var removeRecipients: Bool
        /// A signed archive is signed again with this key, which must be its signer (the
        /// home's signing key): a new header needs a new signature (DESIGN.md §8.4).
        public var signingKey: Ed25519SigningKey?
        /// Or its signature is dropped (`--drop-signature`): the result is unsigned.
        public var dropSignature: Bool

        public init(add: ArchiveAccess, removePasswords: Bool, removeRecipients: Bool,
                    signingKey: Ed25519SigningKey? = nil, dropSignature: Bool = false) {
            self.add = add
            self.removePasswords = removePasswords
            self.removeRecipients = removeRecipients
            self.signingKey = signingKey
            self.dropSignature = dropSignature
        }
    }

    public struct Report: Sendable {
        public let output: String
        /// The slot types of the new header, in order.
        public let slots: [String]
        public let copiedEntries: Int
        /// The key that signed the new header (nil: unsigned).
        public let signer: Ed25519PublicKey?
    }

    /// `output` nil replaces the archive itself; otherwise a new file (replaced only with
    /// `replaceExisting`).
    public static func rekey(_ archive: UnlockedArchive, _ change: Change, output: String? = nil,
                             replaceExisting: Bool = false) throws(ArchiveError) -> Report {
        let reader = archive.reader
        let target = Path.absolute(output ?? reader.path)
        do {
            let header = archive.header
            guard header.mode == .portable else {
                throw ArchiveError.unsupported(archive: reader.path, why: "a secure archive opens only with the device key of the machine that made it; there are no slots to change")
            }
            let signingKey = try signingKey(for: header, change, archive: reader.path)
            if output != nil, !replaceExisting, try FileStatus.of(target) != nil { throw ArchiveError.outputExists(path: target) }
            let slots = header.version == 1 ? archive.version1PasswordSlot.map { [$0] } ?? [] : header.slots
            let kept = slots.filter { slot in
                switch slot {
                case .password: return !change.removePasswords
                case .recipient: return !change.removeRecipients
                case .device: return false
                }
            }
            let added = try change.add.slots(contentKey: archive.contentKey, archiveID: header.archiveID)
            guard !(kept + added).isEmpty else {
                throw ArchiveError.rekeyWouldLock(archive: reader.path)
            }
            // Version 3 stays version 3 with its dependencies (DESIGN.md §8); 1 becomes 2.
            let newHeader = try ArchiveHeader(mode: .portable, archiveID: header.archiveID, created: header.created, slots: kept + added,
                                              version: max(2, header.version), dependsOn: header.dependsOn,
                                              signer: signingKey?.publicKey.bytes)
            let mac = try ArchiveKeys.headerMAC(contentKey: archive.contentKey, header: newHeader)

            let file = try AtomicFile(path: target, mode: 0o600)
            let writer = try ZipWriter(writingTo: file.descriptor, named: target)
            let mtime = Int64(header.created.timeIntervalSince1970)
            try writer.addEntry(name: EntryName.header, size: Int64(newHeader.bytes.count), modified: mtime) { MemorySource(newHeader.bytes) }
            try writer.addEntry(name: EntryName.headerMAC, size: Int64(mac.count), modified: mtime) { MemorySource(mac) }
            if let signingKey {
                let signature = try signingKey.sign(ArchiveReader.signatureContext + newHeader.bytes)
                try writer.addEntry(name: EntryName.headerSignature, size: Int64(signature.count), modified: mtime) { MemorySource(signature) }
            }
            // The manifest and items (version 3: pages, packs, root) exactly as they are: libzip reads each stored entry
            // (checking its CRC-32) and writes the same bytes under the same name. The old
            // header's signature is not one of them.
            let copied = reader.entries.dropFirst(2).filter { $0.name != EntryName.headerSignature }
            for entry in copied {
                try writer.addEntry(name: entry.name, size: entry.size, modified: mtime) { try reader.zip.open(entry) }
            }
            try writer.finish()
            do { try file.commit(replaceExisting: output == nil || replaceExisting) }
            catch let error as SystemError where error.errno == EEXIST { throw ArchiveError.outputExists(path: target) }
            return Report(output: target, slots: newHeader.slots.map(\.typeName), copiedEntries: copied.count, signer: signingKey?.publicKey)
        } catch { throw ArchiveError.creating(target, error) }
    }

    /// What signs the new header: nothing for an unsigned archive (rekeying does not add a
    /// claim of origin) or with `dropSignature`; else the change's key, which must be the
    /// archive's signer: anyone else's signature would say the signer made this header.
    private static func signingKey(for header: ArchiveHeader, _ change: Change, archive: String) throws(ArchiveError) -> Ed25519SigningKey? {
        guard let signer = header.signer, !change.dropSignature else { return nil }
        if let key = change.signingKey, key.publicKey.bytes == signer { return key }
        let fingerprint = (try? Ed25519PublicKey(bytes: signer)).map(SignerKeyFiles.fingerprint) ?? "?"
        throw .signedElsewhere(archive: archive, signer: fingerprint)
    }
}
