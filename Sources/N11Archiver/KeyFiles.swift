import Foundation
import N11Crypto
import N11Format
import N11System

/// Public and private P-256 key files: the forms FileLock and OpenSSL write, read and
/// written here so that every command takes the same files.
public enum KeyFiles {
    /// Public key files and recipient lists are small; anything larger is not one.
    static let maximumSize = 1 << 20

    /// FileLock's form: a `PUBLIC KEY` PEM block whose content is the raw 65-byte point.
    public static func fileLockPEM(_ key: P256PublicKey) -> String { PEMBlock(label: "PUBLIC KEY", bytes: key.x963).text }

    /// The standard form: a `PUBLIC KEY` PEM block holding a SubjectPublicKeyInfo.
    public static func standardPEM(_ key: P256PublicKey) -> String {
        PEMBlock(label: "PUBLIC KEY", bytes: key.subjectPublicKeyInfo).text
    }

    /// A short, stable name for a key: the first 16 hex digits of its point's SHA-256.
    public static func fingerprint(_ key: P256PublicKey) -> String {
        ((try? key.fingerprint) ?? []).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// The public keys in a file: `PUBLIC KEY` PEM blocks (FileLock's raw point or a
    /// SubjectPublicKeyInfo), or, in a file without PEM blocks, one key per line as base64 of
    /// either form (blank lines and lines starting with `#` are skipped).
    public static func publicKeys(inFile path: String) throws(ArchiveError) -> [P256PublicKey] {
        let text = try readText(path)
        do {
            let blocks = try PEMBlock.blocks(in: text)
            let keys: [[UInt8]]
            if text.contains("-----BEGIN ") {
                for block in blocks where block.label != "PUBLIC KEY" {
                    if block.label.hasSuffix("PRIVATE KEY") {
                        throw FormatError.invalidKeyFile("it holds a private key; give the public key instead (`n11archive key export-public` writes it), and keep the private key off this machine")
                    }
                    throw FormatError.invalidKeyFile("a '\(block.label)' block is not a public key")
                }
                keys = blocks.map(\.bytes)
            } else {
                // A line that is not a key is named by its number, never shown: the file may
                // be a password or private key given here by mistake (DESIGN.md §3.7).
                keys = try text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated()
                    .map { ($0.offset + 1, $0.element.trimmingCharacters(in: .whitespaces)) }
                    .filter { !$0.1.isEmpty && !$0.1.hasPrefix("#") }
                    .map { number, line in
                        guard let bytes = Data(base64Encoded: line) else {
                            throw FormatError.invalidKeyFile("line \(number) is not a base64 public key")
                        }
                        return [UInt8](bytes)
                    }
            }
            guard !keys.isEmpty else { throw FormatError.invalidKeyFile("it holds no public key") }
            return try keys.map { bytes in
                // The home's signing key (`key export-public --signing`) given as a recipient:
                // say what it is and where it goes, not only what it is not.
                if (try? Ed25519PublicKey(subjectPublicKeyInfo: bytes)) != nil {
                    throw FormatError.invalidKeyFile("it holds an Ed25519 signing key, which checks who made an archive (`key trust` takes it); a recipient is a P-256 key, from `n11archive key export-public` (without --signing)")
                }
                return bytes.count == P256PublicKey.byteCount ? try P256PublicKey(x963: bytes) : try P256PublicKey(subjectPublicKeyInfo: bytes)
            }
        } catch let error as CryptoError {
            throw .invalidKeyFile(path: path, why: error.description)
        } catch {
            throw .invalidKeyFile(path: path, why: "\(error)")
        }
    }

    /// Whether a private key file needs a passphrase (an `ENCRYPTED PRIVATE KEY` block).
    public static func isEncrypted(_ path: String) throws(ArchiveError) -> Bool {
        try readText(path).contains("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    }

    /// An identity from a PEM private key file (PKCS#8, encrypted or not, or SEC1).
    /// `passphrase` is asked only for an encrypted one.
    public static func identity(inFile path: String, passphrase: () throws -> SecureBytes) throws(ArchiveError) -> P256PrivateKey {
        let text = try readText(path)
        let encrypted = text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        if !text.contains("PRIVATE KEY-----"), text.contains("-----BEGIN PUBLIC KEY-----") {
            throw .invalidKeyFile(path: path, why: "it holds a public key; an identity is the private key (as `n11archive key export-private` writes it)")
        }
        do {
            let secret = encrypted ? try passphrase() : nil
            // Said as it is, not as a wrong passphrase: OpenSSL cannot take such a passphrase.
            if let secret, !P256PrivateKey.isUsablePEMPassphrase(secret) {
                throw ArchiveError.invalidKeyFile(path: path, why: "a passphrase of more than \(P256PrivateKey.maximumPEMPassphraseLength) bytes, or with a NUL byte, cannot open a PEM key")
            }
            return try P256PrivateKey(pem: Array(text.utf8), passphrase: secret)
        } catch let error as CryptoError {
            // OpenSSL cannot tell a wrong passphrase from a damaged encrypted key.
            if encrypted { throw .wrongPassphrase(path: path) }
            throw .invalidKeyFile(path: path, why: error.description)
        } catch let error as ArchiveError {
            throw error
        } catch let error as any CategorizedError {
            throw .caller(error)
        } catch {
            throw .invalidKeyFile(path: path, why: "\(error)")
        }
    }

    /// Writes a new key file that must not replace anything: complete or absent, `mode`.
    public static func writeNew(_ text: String, to path: String, mode: Glibc.mode_t) throws(ArchiveError) {
        do {
            if try FileStatus.of(path) != nil { throw ArchiveError.keyFileExists(path: path) }
            try AtomicFile.write(Array(text.utf8), to: path, mode: mode, replaceExisting: false)
        } catch let error as SystemError where error.errno == EEXIST {
            throw .keyFileExists(path: path)
        } catch { throw ArchiveError.wrap(error) }
    }

    private static func readText(_ path: String) throws(ArchiveError) -> String {
        do {
            guard let status = try FileStatus.of(path, followLinks: true) else { throw ArchiveError.keyFileMissing(path: path) }
            guard status.kind == .regular else { throw ArchiveError.invalidKeyFile(path: path, why: "not a regular file") }
            let bytes = try FileDescriptor.openForReading(path).readAll(limit: maximumSize)
            guard let text = String(validating: bytes, as: UTF8.self) else {
                throw ArchiveError.invalidKeyFile(path: path, why: "not a text file")
            }
            return text
        } catch { throw ArchiveError.wrap(error) }
    }
}
