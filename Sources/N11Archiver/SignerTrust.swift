import Foundation
import N11Crypto
import N11Format
import N11System
import N11Vault

/// Which signers a command trusts, and the rule that goes with them (DESIGN.md §8.4): with
/// at least one trusted key, an archive is read only if a trusted key signed its header, and
/// a file that carries a dated archive name (`create --output-dir`) only under the second
/// its signed header was made in, so that a copy of an old archive renamed to a newer date
/// is not taken for a newer night. With none, nothing is required (as age and restic: an
/// archive that opens is read). The check needs no key and is made before any Argon2id or
/// ECDH work.
public struct SignerTrust: Sendable {
    public let keys: [Ed25519PublicKey]

    public init(keys: [Ed25519PublicKey]) { self.keys = keys }

    /// No rule: any archive that opens is read.
    public static let anySigner = SignerTrust(keys: [])

    public var isActive: Bool { !keys.isEmpty }

    /// Why an archive with this header and verified signer (nil: unsigned) is not trusted,
    /// or nil when it is (or there is no rule). `fileName` is the archive's name where it
    /// lies (a path's or remote path's last component).
    public func refusal(signer: Ed25519PublicKey?, header: ArchiveHeader, fileName: String) -> String? {
        guard isActive else { return nil }
        guard let signer else {
            return header.version < 3 ? "it is a version \(header.version) archive, which is never signed, and only signed archives are trusted here"
                                      : "it is not signed, and only archives signed by a trusted key are"
        }
        guard keys.contains(signer) else {
            return "it is signed by key \(SignerKeyFiles.fingerprint(signer)), which is not a trusted signer here"
        }
        let name = Path.lastComponent(of: fileName.split(separator: ":", omittingEmptySubsequences: false).last.map(String.init) ?? fileName)
        if ArchiveRetention.isArchiveName(name) {
            let stamp = ArchiveRetention.stamp(of: name), signed = ArchiveRetention.stamp(of: ArchiveRetention.fileName(for: header.created))
            if stamp != signed {
                return "its name dates it \(stamp), but its signed header says it was made at \(signed): a copy of another night's archive under a new name"
            }
        }
        return nil
    }

    /// `refusal` for what a store's listing read of an archive's first bytes.
    public func refusal(_ signature: ArchiveKeyEntries.Signature, header: ArchiveHeader, fileName: String) -> String? {
        guard isActive else { return nil }
        if signature == .invalid { return "its header was changed after it was signed (the signature does not verify)" }
        return refusal(signer: signature.signer, header: header, fileName: fileName)
    }

    /// `refusal` as an error (77).
    public func check(_ signature: ArchiveKeyEntries.Signature, header: ArchiveHeader, name: String) throws(ArchiveError) {
        if let why = refusal(signature, header: header, fileName: name) { throw .untrustedSigner(archive: name, why: why) }
    }

    /// The keys of `--signed-by` files when given, else the home's trusted signers.
    public static func resolve(signedBy files: [String], home: N11Home) throws(ArchiveError) -> SignerTrust {
        if !files.isEmpty {
            var keys: [Ed25519PublicKey] = []
            for file in files { keys += try SignerKeyFiles.keys(inFile: file) }
            return SignerTrust(keys: keys)
        }
        return SignerTrust(keys: try TrustedSigners.keys(in: home))
    }
}

/// Ed25519 signer public key files: PEM `PUBLIC KEY` blocks holding a SubjectPublicKeyInfo
/// (RFC 8410, what `openssl pkey -pubout` writes), or lines of 64 hex digits (as `info`
/// shows a signer). `key export-public --signing` writes the PEM form.
public enum SignerKeyFiles {
    static let maximumSize = 1 << 20

    public static func pem(_ key: Ed25519PublicKey) -> String { PEMBlock(label: "PUBLIC KEY", bytes: key.subjectPublicKeyInfo).text }

    /// A short, stable name for a signer: the first 16 hex digits of its key's SHA-256.
    public static func fingerprint(_ key: Ed25519PublicKey) -> String {
        ((try? key.fingerprint) ?? []).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    public static func keys(inFile path: String) throws(ArchiveError) -> [Ed25519PublicKey] {
        let text: String
        do {
            guard let status = try FileStatus.of(path, followLinks: true) else { throw ArchiveError.keyFileMissing(path: path) }
            guard status.kind == .regular else { throw ArchiveError.invalidKeyFile(path: path, why: "not a regular file") }
            guard let read = String(validating: try FileDescriptor.openForReading(path).readAll(limit: maximumSize), as: UTF8.self) else {
                throw ArchiveError.invalidKeyFile(path: path, why: "not a text file")
            }
            text = read
        } catch { throw ArchiveError.wrap(error) }
        do { return try keys(in: text) } catch { throw .invalidKeyFile(path: path, why: error.description) }
    }

    /// The keys in a file's text; at least one.
    static func keys(in text: String) throws(FormatError) -> [Ed25519PublicKey] {
        var keys: [Ed25519PublicKey] = []
        if text.contains("-----BEGIN ") {
            for block in try PEMBlock.blocks(in: text) {
                guard block.label == "PUBLIC KEY" else {
                    throw .invalidKeyFile(block.label.hasSuffix("PRIVATE KEY") ? "it holds a private key; give the signer's public key (`n11archive key export-public --signing` writes it)"
                                                                              : "a '\(block.label)' block is not a public key")
                }
                guard let key = try? Ed25519PublicKey(subjectPublicKeyInfo: block.bytes) else {
                    throw .invalidKeyFile(block.bytes.count == 91 || block.bytes.count == 65
                                          ? "it holds a P-256 key (a recipient's key, for `--recipient`); a signer's key is Ed25519 (`n11archive key export-public --signing`)"
                                          : "a PUBLIC KEY block is not an Ed25519 key")
                }
                keys.append(key)
            }
        } else {
            // A line that is not a key is named by its number, never shown (DESIGN.md §3.7).
            for (number, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
                let line = raw.trimmingCharacters(in: .whitespaces)
                if line.isEmpty || line.hasPrefix("#") { continue }
                guard let bytes = [UInt8](hex: line, length: Ed25519PublicKey.byteCount), let key = try? Ed25519PublicKey(bytes: bytes) else {
                    throw .invalidKeyFile("line \(number + 1) is not an Ed25519 public key (64 hex digits)")
                }
                keys.append(key)
            }
        }
        guard !keys.isEmpty else { throw .invalidKeyFile("it holds no Ed25519 public key") }
        return keys
    }
}

/// The home's trusted signers: `HOME/trusted-signers.pem` (0600), public keys that `restore`,
/// `verify`, `list`, `rekey`, `prune` and `archives` require when no `--signed-by` is given.
/// A plain file, not a key store record, so that a job with a PIN-sealed key store (or none)
/// still checks signers; `key backup` carries it, `key restore-backup` brings it back.
public enum TrustedSigners {
    public static func path(in home: N11Home) -> String { Path.join(home.root, "trusted-signers.pem") }

    /// The trusted keys; none when the file does not exist. A file another user could have
    /// written is refused (78): it decides which archives are believed.
    public static func keys(in home: N11Home) throws(ArchiveError) -> [Ed25519PublicKey] {
        let path = path(in: home)
        do {
            guard try FileStatus.of(path) != nil else { return [] }
            try PrivatePermissions.checkFile(path)
        } catch let violation as PrivatePermissions.Violation {
            throw .vault(.unsafePermissions(violation.description))
        } catch { throw ArchiveError.wrap(error) }
        return try SignerKeyFiles.keys(inFile: path)
    }

    /// Adds `key` (false if it is trusted already), written whole and atomically.
    @discardableResult
    public static func add(_ key: Ed25519PublicKey, in home: N11Home) throws(ArchiveError) -> Bool {
        let current = try keys(in: home)
        guard !current.contains(key) else { return false }
        try write(current + [key], in: home)
        return true
    }

    /// Removes the trusted keys whose fingerprint starts with `prefix`; returns them.
    public static func remove(matching prefix: String, in home: N11Home) throws(ArchiveError) -> [Ed25519PublicKey] {
        let current = try keys(in: home)
        let removed = current.filter { SignerKeyFiles.fingerprint($0).hasPrefix(prefix.lowercased()) }
        if !removed.isEmpty { try write(current.filter { !removed.contains($0) }, in: home) }
        return removed
    }

    /// Replaces the list (an empty list removes the file: no rule).
    public static func write(_ keys: [Ed25519PublicKey], in home: N11Home) throws(ArchiveError) {
        let path = path(in: home)
        do {
            guard !keys.isEmpty else {
                if try FileStatus.of(path) != nil { try FileSystem.removeFile(path) }
                return
            }
            let text = "# n11archive trusts archives signed by these keys (`n11archive key trust`, `key untrust`)\n"
                + keys.map(SignerKeyFiles.pem).joined()
            try AtomicFile.write(Array(text.utf8), to: path, mode: 0o600, replaceExisting: true)
        } catch { throw ArchiveError.wrap(error) }
    }
}
