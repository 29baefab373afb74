import Foundation
import N11Crypto
import N11Format

/// The key schedule of FORMAT.md §3–5.
enum ArchiveKeys {
    static let entryInfoPrefix = Array("n11archive/v1/entry/".utf8)
    static let headerInfo = Array("n11archive/v2/header".utf8)
    static let slotAADPrefix = Array("n11archive/v2/slot".utf8)

    /// Portable KEK: Argon2id over the password with the header's (or slot's) parameters.
    static func portableKEK(password: SecureBytes, kdf: ArchiveHeader.KDF) throws -> SecureBytes {
        let parameters = try Argon2Parameters(opsLimit: kdf.opsLimit, memoryBytes: kdf.memoryKiB << 10)
        return try Argon2id.deriveKey(password: password, salt: kdf.saltBytes, parameters: parameters)
    }

    /// Version 1 keywrap.bin: the content key sealed under the KEK, authenticating every header byte.
    static func unwrap(_ keyWrap: [UInt8], kek: SecureBytes, header: ArchiveHeader) throws(CryptoError) -> SecureBytes {
        try AEAD.openSecret(.aes256GCM, key: kek, sealed: keyWrap, aad: header.bytes)
    }

    /// Version 2 password and device slots: the content key sealed under the KEK, bound to
    /// the archive ID (the header MAC binds the rest).
    static func wrapInSlot(contentKey: SecureBytes, kek: SecureBytes, archiveID: [UInt8]) throws -> [UInt8] {
        try AEAD.sealSecret(.aes256GCM, key: kek, secret: contentKey, aad: slotAADPrefix + archiveID)
    }

    static func unwrapSlot(_ wrap: [UInt8], kek: SecureBytes, archiveID: [UInt8]) throws(CryptoError) -> SecureBytes {
        try AEAD.openSecret(.aes256GCM, key: kek, sealed: wrap, aad: slotAADPrefix + archiveID)
    }

    /// Version 2 header.mac: HMAC-SHA256 under HKDF(CK, archive ID, "n11archive/v2/header")
    /// of the header's exact bytes, slots included: no slot can be added, removed or changed
    /// without the content key.
    static func headerMAC(contentKey: SecureBytes, header: ArchiveHeader) throws -> [UInt8] {
        let key = try HKDF.deriveKey(inputKey: contentKey, salt: header.archiveID, info: headerInfo)
        return try HMACSHA256.authenticate(header.bytes, key: key)
    }

    static func headerMACVerifies(_ mac: [UInt8], contentKey: SecureBytes, header: ArchiveHeader) throws -> Bool {
        let key = try HKDF.deriveKey(inputKey: contentKey, salt: header.archiveID, info: headerInfo)
        return HMACSHA256.verify(mac, for: header.bytes, key: key)
    }

    /// HKDF-SHA256(CK, salt = archive ID, info = "n11archive/v1/entry/" ‖ name), in both versions.
    static func entryKey(contentKey: SecureBytes, header: ArchiveHeader, entryName: String) throws -> SecureBytes {
        try HKDF.deriveKey(inputKey: contentKey, salt: header.archiveID, info: entryInfoPrefix + Array(entryName.utf8))
    }

    /// The same key, into a reused locked buffer (the per-entry loops).
    static func entryKey(contentKey: SecureBytes, header: ArchiveHeader, entryName: String, into slot: SecureBytes) throws {
        try HKDF.derive(inputKey: contentKey, salt: header.archiveID, info: entryInfoPrefix + Array(entryName.utf8), into: slot)
    }
}

/// Who may open an archive being made or rekeyed: passwords (each with its own Argon2id
/// salt and cost), P-256 recipients, or, for a secure archive, a new device key.
public struct ArchiveAccess {
    public var passwords: [SecureBytes]
    public var recipients: [P256PublicKey]
    public var kdf: Argon2Parameters
    /// The salt of each password slot; nil: fresh ones. An incremental archive reuses its
    /// chain's (DESIGN.md §8.3): the same KEK, so a restore derives each password once.
    public var passwordSalts: [[UInt8]]?
    /// With `passwordSalts`: the key each salt gives, derived already (no second Argon2id).
    var passwordKEKs: [SecureBytes]?

    public init(passwords: [SecureBytes] = [], recipients: [P256PublicKey] = [], kdf: Argon2Parameters = .moderate) {
        self.passwords = passwords
        self.recipients = recipients
        self.kdf = kdf
    }

    public var isEmpty: Bool { passwords.isEmpty && recipients.isEmpty }

    /// The key slots for `contentKey` (FORMAT.md §4): passwords first, then recipients.
    func slots(contentKey: SecureBytes, archiveID: [UInt8]) throws -> [ArchiveHeader.KeySlot] {
        var slots: [ArchiveHeader.KeySlot] = []
        for (n, password) in passwords.enumerated() {
            let salt = passwordSalts.flatMap { n < $0.count ? $0[n] : nil } ?? SecureRandom.bytes(Argon2id.saltLength)
            let kdfHeader = ArchiveHeader.KDF(opsLimit: kdf.opsLimit, memoryKiB: kdf.memoryBytes >> 10, salt: salt)
            let kek = try passwordKEKs.flatMap { n < $0.count ? $0[n] : nil } ?? ArchiveKeys.portableKEK(password: password, kdf: kdfHeader)
            slots.append(.password(kdfHeader, wrap: try ArchiveKeys.wrapInSlot(contentKey: contentKey, kek: kek, archiveID: archiveID)))
        }
        for recipient in recipients {
            slots.append(.recipient(wrap: try AppleECIES.seal(contentKey, to: recipient)))
        }
        return slots
    }
}

/// The keys of an archive being made (FORMAT.md §3–4): its version 2 header with the key
/// slots, a fresh content key, the header MAC, and for a secure archive the device key that
/// the key store must keep.
struct NewArchiveKeys {
    let header: ArchiveHeader
    let contentKey: SecureBytes
    let deviceKey: SecureBytes?
    let headerMAC: [UInt8]

    /// `access` is asked for a portable archive only. `version` 3: a full archive of
    /// DESIGN.md §8 (no dependencies, not signed).
    init(mode: ArchiveMode, created: Date, version: Int = 2, signer: Ed25519PublicKey? = nil, dependsOn: [[UInt8]] = [],
         access: () throws -> ArchiveAccess) throws {
        let archiveID = SecureRandom.bytes(16)
        contentKey = try SecureBytes(randomCount: 32)
        let slots: [ArchiveHeader.KeySlot]
        switch mode {
        case .portable:
            let who = try access()
            guard !who.isEmpty else { throw ArchiveError.passwordNeeded }
            slots = try who.slots(contentKey: contentKey, archiveID: archiveID)
            deviceKey = nil
        case .secure:
            let key = try SecureBytes(randomCount: 32)
            slots = [.device(wrap: try ArchiveKeys.wrapInSlot(contentKey: contentKey, kek: key, archiveID: archiveID))]
            deviceKey = key
        }
        header = try ArchiveHeader(mode: mode, archiveID: archiveID, created: created, slots: slots, version: version,
                                   dependsOn: dependsOn, signer: signer?.bytes)
        headerMAC = try ArchiveKeys.headerMAC(contentKey: contentKey, header: header)
    }

    func entryKey(_ entryName: String) throws -> SecureBytes {
        try ArchiveKeys.entryKey(contentKey: contentKey, header: header, entryName: entryName)
    }

    func entryKey(_ entryName: String, into slot: SecureBytes) throws {
        try ArchiveKeys.entryKey(contentKey: contentKey, header: header, entryName: entryName, into: slot)
    }
}
