import N11Crypto
import N11Format

/// The key schedule of FORMAT.md §3–5.
enum ArchiveKeys {
    static let entryInfoPrefix = Array("n11archive/v1/entry/".utf8)

    /// Portable KEK: Argon2id over the password with the header's parameters.
    static func portableKEK(password: SecureBytes, kdf: ArchiveHeader.KDF) throws -> SecureBytes {
        let parameters = try Argon2Parameters(opsLimit: kdf.opsLimit, memoryBytes: kdf.memoryKiB << 10)
        return try Argon2id.deriveKey(password: password, salt: kdf.saltBytes, parameters: parameters)
    }

    /// keywrap.bin: the content key sealed under the KEK, authenticating every header byte.
    static func wrap(contentKey: SecureBytes, kek: SecureBytes, header: ArchiveHeader) throws -> [UInt8] {
        try AEAD.sealSecret(.aes256GCM, key: kek, secret: contentKey, aad: header.bytes)
    }

    static func unwrap(_ keyWrap: [UInt8], kek: SecureBytes, header: ArchiveHeader) throws(CryptoError) -> SecureBytes {
        try AEAD.openSecret(.aes256GCM, key: kek, sealed: keyWrap, aad: header.bytes)
    }

    /// HKDF-SHA256(CK, salt = archive ID, info = "n11archive/v1/entry/" ‖ name).
    static func entryKey(contentKey: SecureBytes, header: ArchiveHeader, entryName: String) throws -> SecureBytes {
        try HKDF.deriveKey(inputKey: contentKey, salt: header.archiveID, info: entryInfoPrefix + Array(entryName.utf8))
    }

    /// The same key, into a reused locked buffer (the per-entry loops).
    static func entryKey(contentKey: SecureBytes, header: ArchiveHeader, entryName: String, into slot: SecureBytes) throws {
        try HKDF.derive(inputKey: contentKey, salt: header.archiveID, info: entryInfoPrefix + Array(entryName.utf8), into: slot)
    }
}
