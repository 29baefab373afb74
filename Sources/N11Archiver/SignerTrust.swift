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
    /// Whether the keys are `--signed-by`'s for this command (not the home's list): a
    /// refusal's advice differs.
    public let fromOption: Bool

    public init(keys: [Ed25519PublicKey], fromOption: Bool = false) {
        self.keys = keys
        self.fromOption = fromOption
    }

    /// No rule: any archive that opens is read.
    public static let anySigner = SignerTrust(keys: [])

    public var isActive: Bool { !keys.isEmpty }

    /// Why an archive is not trusted.
    public enum Refusal: Sendable, Equatable, CustomStringConvertible {
        /// Version 1 or 2 (never signed), or a version 3 archive without a signature.
        case unsigned(version: Int)
        /// Signed by a key that is not trusted (its fingerprint).
        case otherSigner(String, fromOption: Bool)
        /// The header names a signer, but the signature is missing or does not verify.
        case invalidSignature
        /// Signed, under a dated name of another second than its signed creation time.
        case renamed(nameStamp: String, signedStamp: String)

        public var description: String {
            switch self {
            case .unsigned(let version) where version < 3:
                "it is a version \(version) archive, which is never signed, and only signed archives are trusted here"
            case .unsigned: "it is not signed, and only archives signed by a trusted key are read here"
            case let .otherSigner(fingerprint, fromOption):
                "it is signed by key \(fingerprint), which is not \(fromOption ? "a key given with --signed-by" : "a trusted signer here")"
            case .invalidSignature: "its header was changed after it was signed (the signature does not verify)"
            case let .renamed(name, signed):
                "its name dates it \(name), but its signed header says it was made at \(signed): a copy of another night's archive under a new name"
            }
        }

        /// What the user can do about it.
        public var hint: String {
            switch self {
            case .unsigned:
                "it was made without a signature (before signing existed, with --format-version 2, or in a home without a signing key); if you know where it came from, read it once with --no-signer-check"
            case .otherSigner(_, true):
                "this command trusts only the keys in its --signed-by files; `n11archive info FILE` shows the signer"
            case .otherSigner:
                "`n11archive info FILE` shows its signer; if it is this home's own key, `n11archive key trust --own` trusts it; another you know, `n11archive key trust KEYFILE` (or --signed-by KEYFILE for one command); or read the archive once with --no-signer-check"
            case .invalidSignature:
                "treat it as tampered with: restore another archive (`n11archive archives DIR` shows which are trusted)"
            case let .renamed(_, signed):
                "its content is the archive made at \(signed); if you renamed it yourself, give it back its name n11archive-\(signed).nu11vlt"
            }
        }
    }

    /// Why an archive with this signature state and header is not trusted, or nil when it
    /// is (or there is no rule). `fileName` is where it lies: a path, or `REMOTE:PATH`.
    public func refusal(_ signature: ArchiveKeyEntries.Signature, header: ArchiveHeader, fileName: String) -> Refusal? {
        guard isActive else { return nil }
        let signer: Ed25519PublicKey
        switch signature {
        case .invalid: return .invalidSignature
        case .unsigned: return .unsigned(version: header.version)
        case .verified(let key): signer = key
        }
        guard keys.contains(signer) else { return .otherSigner(SignerKeyFiles.fingerprint(signer), fromOption: fromOption) }
        let name = Self.lastComponent(of: fileName)
        if ArchiveRetention.isArchiveName(name) {
            let stamp = ArchiveRetention.stamp(of: name), signed = ArchiveRetention.stamp(of: ArchiveRetention.fileName(for: header.created))
            if stamp != signed { return .renamed(nameStamp: stamp, signedStamp: signed) }
        }
        return nil
    }

    /// The file's own name in a path or `REMOTE:PATH` (a remote's name may hold `:`, its path
    /// after the first one).
    static func lastComponent(of location: String) -> String {
        String(location.split(whereSeparator: { $0 == "/" || $0 == ":" }).last ?? Substring(location))
    }

    /// `refusal` as an error (77).
    public func check(_ signature: ArchiveKeyEntries.Signature, header: ArchiveHeader, name: String) throws(ArchiveError) {
        if let refusal = refusal(signature, header: header, fileName: name) { throw .untrustedSigner(archive: name, refusal) }
    }

    /// The keys of `--signed-by` files when given, else the home's trusted signers.
    public static func resolve(signedBy files: [String], home: N11Home) throws(ArchiveError) -> SignerTrust {
        if !files.isEmpty {
            var keys: [Ed25519PublicKey] = []
            for file in files { keys += try SignerKeyFiles.keys(inFile: file) }
            return SignerTrust(keys: keys, fromOption: true)
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
            guard let status = try FileStatus.of(path, followLinks: true) else { throw ArchiveError.signerKeyFile(path: path, why: "it does not exist") }
            guard status.kind == .regular else { throw ArchiveError.signerKeyFile(path: path, why: "it is not a regular file") }
            guard let read = String(validating: try FileDescriptor.openForReading(path).readAll(limit: maximumSize), as: UTF8.self) else {
                throw ArchiveError.signerKeyFile(path: path, why: "it is not a text file")
            }
            text = read
        } catch { throw ArchiveError.wrap(error) }
        do { return try keys(in: text) } catch {
            guard case .invalidKeyFile(let why) = error else { throw .signerKeyFile(path: path, why: error.description) }
            throw .signerKeyFile(path: path, why: why)
        }
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
                guard let bytes = [UInt8](hex: line.lowercased(), length: Ed25519PublicKey.byteCount), let key = try? Ed25519PublicKey(bytes: bytes) else {
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
        do { return try SignerKeyFiles.keys(inFile: path) }
        catch .signerKeyFile(_, let why) { throw .trustedSignersDamaged(path: path, why: why) }
    }

    /// Runs `change` under the home's lock (the key store's writers hold it too), so two
    /// `key trust` runs never lose one another's key.
    private static func locked<T>(_ home: N11Home, _ change: () throws(ArchiveError) -> T) throws(ArchiveError) -> T {
        let lock: FileLock
        do {
            switch try FileLock.acquire(home.lockPath, waitSeconds: 60) {
            case .acquired(let held): lock = held
            case .heldBy(let pid): throw ArchiveError.vault(.busy(lock: home.lockPath, holder: pid))
            }
        } catch let error as ArchiveError { throw error } catch { throw ArchiveError.wrap(error) }
        defer { lock.release() }
        return try change()
    }

    /// Adds `key` (false if it is trusted already), written whole and atomically.
    @discardableResult
    public static func add(_ key: Ed25519PublicKey, in home: N11Home) throws(ArchiveError) -> Bool {
        try locked(home) { () throws(ArchiveError) -> Bool in
            let current = try keys(in: home)
            guard !current.contains(key) else { return false }
            try write(current + [key], in: home)
            return true
        }
    }

    /// Removes the trusted keys whose fingerprint starts with `prefix`; returns them.
    public static func remove(matching prefix: String, in home: N11Home) throws(ArchiveError) -> [Ed25519PublicKey] {
        precondition(!prefix.isEmpty, "an empty prefix would match every signer")
        return try locked(home) { () throws(ArchiveError) -> [Ed25519PublicKey] in
            let current = try keys(in: home)
            let removed = current.filter { SignerKeyFiles.fingerprint($0).hasPrefix(prefix.lowercased()) }
            if !removed.isEmpty { try write(current.filter { !removed.contains($0) }, in: home) }
            return removed
        }
    }

    /// Replaces the list (an empty list removes the file: no rule).
    private static func write(_ keys: [Ed25519PublicKey], in home: N11Home) throws(ArchiveError) {
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
