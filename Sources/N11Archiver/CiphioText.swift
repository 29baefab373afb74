import Foundation
import N11Crypto
import N11Format
import N11Vault

/// Ciphio's text encryption (seed 002), so that n11archive and the Ciphio apps read each
/// other's messages: a key from PBKDF2-HMAC-SHA256 (100,000 iterations, 16-byte salt,
/// 32 bytes), then AES-256 in GCM (authenticated), CBC or CTR (not authenticated).
public enum CiphioText {
    public static let iterations = 100_000

    public static func encrypt(_ plaintext: SecureBytes, secret: SecureBytes,
                               algorithm: CiphioMessage.Algorithm = .gcm) throws(ArchiveError) -> String {
        do {
            let salt = SecureRandom.bytes(CiphioMessage.saltLength)
            let iv = SecureRandom.bytes(algorithm.ivLength)
            let key = try PBKDF2.deriveKey(password: secret, salt: salt, iterations: iterations)
            var plain = plaintext.withUnsafeBytes { Array($0) }
            defer { plain.wipe() }
            let ciphertext: [UInt8]
            switch algorithm {
            case .gcm:
                let sealed = try AEAD.seal(.aes256GCM, key: key, nonce: iv, plaintext: plain)
                ciphertext = sealed.ciphertext + sealed.tag
            case .cbc: ciphertext = try UnauthenticatedCipher.aes256CBC.encrypt(plain, key: key, iv: iv)
            case .ctr: ciphertext = try UnauthenticatedCipher.aes256CTR.encrypt(plain, key: key, iv: iv)
            }
            return CiphioMessage(algorithm: algorithm, salt: salt, iv: iv, ciphertext: ciphertext).text
        } catch { throw ArchiveError.wrap(error) }
    }

    /// The plaintext, in locked memory. A GCM message that fails its tag, or a CBC one whose
    /// padding is wrong, is `wrongSecret` (a wrong password, or a changed message); a CTR
    /// message cannot fail: with a wrong password it decrypts to garbage.
    public static func decrypt(_ text: String, secret: SecureBytes, source: String) throws(ArchiveError) -> (SecureBytes, CiphioMessage.Algorithm) {
        let message: CiphioMessage
        do { message = try CiphioMessage(parsing: text) } catch { throw .caller(error) }
        do {
            let key = try PBKDF2.deriveKey(password: secret, salt: message.salt, iterations: iterations)
            switch message.algorithm {
            case .gcm:
                let tagStart = message.ciphertext.count - 16
                var plain = try AEAD.open(.aes256GCM, key: key, nonce: message.iv, ciphertext: Array(message.ciphertext[..<tagStart]),
                                          tag: Array(message.ciphertext[tagStart...]))
                defer { plain.wipe() }
                return (try SecureBytes(copying: plain), .gcm)
            case .cbc: return (try UnauthenticatedCipher.aes256CBC.decrypt(message.ciphertext, key: key, iv: message.iv), .cbc)
            case .ctr: return (try UnauthenticatedCipher.aes256CTR.decrypt(message.ciphertext, key: key, iv: message.iv), .ctr)
            }
        } catch CryptoError.authenticationFailed {
            throw .messageNotOpened(source: source)
        } catch { throw ArchiveError.wrap(error) }
    }
}

extension CiphioText {
    /// A Ciphio message made a vault note (`vault add --note --from-ciphio`): decrypted in
    /// memory straight into the note's bytes, so the plaintext never touches the disk. A ctr
    /// message opens under any password (a cbc one under one wrong password in 256, where
    /// its padding happens to check), and a changed one opens changed: stored
    /// silently, the vault would keep garbage or a forgery, so it is refused unless
    /// `allowUnauthenticated` (the caller then warns). The note must be UTF-8 text. `source`
    /// is how messages name where it came from ("'a.txt'", "standard input").
    public static func note(from message: String, source: String, secret: SecureBytes, allowUnauthenticated: Bool,
                            name: String, compartment: Compartment, expires: Date?) throws(ArchiveError) -> (Vault.NewItem, CiphioMessage.Algorithm) {
        let (plain, algorithm) = try decrypt(message, secret: secret, source: source)
        if algorithm != .gcm && !allowUnauthenticated { throw .unauthenticatedMessage(source: source, algorithm: algorithm.rawValue) }
        let text = plain.withUnsafeBytes { Array($0) }
        guard String(validating: text, as: UTF8.self) != nil else { throw .messageNotText(source: source, algorithm: algorithm.rawValue) }
        return (Vault.NewItem(bytes: text, kind: .note, name: name, compartment: compartment, expires: expires), algorithm)
    }
}

