import Foundation
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

/// The keys of an archive being made (FORMAT.md §3–4): its header, a fresh content key, the
/// KEK that wraps it (from the password, or random for a secure archive's device key), and
/// the wrap.
struct NewArchiveKeys {
    let header: ArchiveHeader
    let contentKey: SecureBytes
    let kek: SecureBytes
    let keyWrap: [UInt8]

    /// `password` is called for a portable archive only.
    init(mode: ArchiveMode, kdf: Argon2Parameters, created: Date, password: () throws -> SecureBytes) throws {
        let archiveID = SecureRandom.bytes(16)
        contentKey = try SecureBytes(randomCount: 32)
        switch mode {
        case .portable:
            let parameters = ArchiveHeader.KDF(opsLimit: kdf.opsLimit, memoryKiB: kdf.memoryBytes >> 10,
                                               salt: SecureRandom.bytes(Argon2id.saltLength))
            header = try ArchiveHeader(mode: .portable, archiveID: archiveID, created: created, kdf: parameters)
            kek = try ArchiveKeys.portableKEK(password: try password(), kdf: parameters)
        case .secure:
            header = try ArchiveHeader(mode: .secure, archiveID: archiveID, created: created, kdf: nil)
            kek = try SecureBytes(randomCount: 32)
        }
        keyWrap = try ArchiveKeys.wrap(contentKey: contentKey, kek: kek, header: header)
    }

    func entryKey(_ entryName: String) throws -> SecureBytes {
        try ArchiveKeys.entryKey(contentKey: contentKey, header: header, entryName: entryName)
    }

    func entryKey(_ entryName: String, into slot: SecureBytes) throws {
        try ArchiveKeys.entryKey(contentKey: contentKey, header: header, entryName: entryName, into: slot)
    }
}
