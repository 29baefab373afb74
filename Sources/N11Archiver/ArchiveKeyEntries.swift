import N11Container
import N11Crypto
import N11Format
import N11System
import N11Vault

/// The two entries that open an archive's content key: the header and the second entry
/// (`keywrap.bin` in version 1, `header.mac` in version 2). Nothing after them is needed, so a
/// remote archive can be authenticated from its first 64 KiB (`init(prefix:name:)`), and a
/// planted object never has to be downloaded whole.
public struct ArchiveKeyEntries {
    public let header: ArchiveHeader
    let keyEntry: [UInt8]
    let name: String
    /// Whether `header.sig` verified (version 3): checked with no key, so `archives` and
    /// `prune` can tell a trusted signer's archives from planted ones.
    public let signature: Signature

    public enum Signature: Sendable, Equatable {
        case unsigned
        case verified(Ed25519PublicKey)
        /// The header names a signer but `header.sig` is missing or does not verify: the
        /// header was changed (or damaged) after it was signed.
        case invalid

        public var signer: Ed25519PublicKey? { if case .verified(let key) = self { return key } else { return nil } }
    }

    /// Which kind of slot opened the content key. A password or device slot (or a version 1
    /// archive, which has only those) needs this home's secret to make; a recipient slot
    /// needs only the public key, which is meant to be shared: it proves nothing about who
    /// made the archive (DESIGN.md §3.8).
    public enum OpenedBy: Sendable, Equatable {
        case password, device, recipient

        /// Whether the archive authenticates as written by the holder of this home's secrets.
        public var provesOrigin: Bool { self != .recipient }
    }

    /// A content key, the kind of slot that gave it, and for a version 1 portable archive its
    /// password as a version 2 password slot: the same `kdf` (salt and cost) and so the same
    /// KEK, wrapping the same content key (FORMAT.md §4.3). `rekey` keeps it, so a version 1
    /// archive keeps opening with its password.
    struct OpenedKey {
        let key: SecureBytes
        let openedBy: OpenedBy
        var version1PasswordSlot: ArchiveHeader.KeySlot? = nil
    }

    init(header: ArchiveHeader, keyEntry: [UInt8], name: String, signature: Signature) {
        self.header = header
        self.keyEntry = keyEntry
        self.name = name
        self.signature = signature
    }

    /// The key entries from the first bytes of an archive file: its first two ZIP entries,
    /// stored, named as FORMAT.md §1 says and within its size bounds. nil if the bytes do not
    /// hold them (not an archive, or its header does not parse).
    ///
    /// A signed header's signature (the third entry) is checked too; one that is missing or
    /// does not verify gives `signature == .invalid`, not nil, so that a trust check can say
    /// why the archive is refused.
    public init?(prefix bytes: [UInt8], name: String) {
        let found = ZipPrefix.entries(of: bytes, count: 3)
        guard found.count >= 2, found[0].name == EntryName.header, found[0].data.count <= FormatLimits.headerBytes,
              let header = try? ArchiveHeader(parsing: found[0].data),
              found[1].name == EntryName.second(version: header.version).name else { return nil }
        let keyEntrySize = found[1].name == EntryName.keyWrap ? FormatLimits.keyWrapBytes : FormatLimits.headerMACBytes
        guard found[1].data.count == keyEntrySize, (try? Self.checkSlots(of: header)) != nil else { return nil }
        var signature = Signature.unsigned
        if let signer = header.signer {
            signature = .invalid
            if found.count == 3, found[2].name == EntryName.headerSignature, let key = try? Ed25519PublicKey(bytes: signer),
               key.verifies(found[2].data, of: ArchiveReader.signatureContext + header.bytes) {
                signature = .verified(key)
            }
        }
        self.init(header: header, keyEntry: found[1].data, name: name, signature: signature)
    }

    /// Authenticates the header through a password or device slot only (no identity is tried:
    /// see `OpenedBy`), from these two entries alone. What `prune REMOTE:DIR` counts by.
    public func authenticate(password: () throws -> SecureBytes?, keyStore: () throws -> KeyStore,
                             kdfCeiling: KDFCeiling = .standard, kdfCache: KDFCache? = nil) throws(ArchiveError) -> OpenedBy {
        do {
            return try unwrapContentKey(password: password, keyStore: keyStore, identities: { [] }, kdfCeiling: kdfCeiling,
                                        kdfCache: kdfCache, derive: { try $0() }).openedBy
        } catch { throw ArchiveError.reading(name, error) }
    }

    /// The header checks that need the crypto layer, made with the others before any slot is
    /// tried (FORMAT.md §2): every `p256` slot's ephemeral key must be a point on P-256, so
    /// whether an archive is refused never depends on which key a reader happens to hold.
    static func checkSlots(of header: ArchiveHeader) throws(FormatError) {
        var recipient = 0
        for case .recipient(let wrap) in header.slots {
            recipient += 1
            guard (try? P256PublicKey(x963: Array(wrap.prefix(P256PublicKey.byteCount)))) != nil else {
                throw .invalidHeader("p256 slot \(recipient)'s ephemeral key is not a point on P-256")
            }
        }
    }

    /// Derives or looks up the key-encryption key and unwraps the content key. `derive` runs
    /// each Argon2id (the file reader closes its ZIP meanwhile, to bound memory). A signed
    /// header whose signature fails is refused first, before any slot (FORMAT.md §10.7).
    func unwrapContentKey(password: () throws -> SecureBytes?, keyStore: () throws -> KeyStore,
                          identities: () throws -> [P256PrivateKey], kdfCeiling: KDFCeiling, kdfCache: KDFCache?,
                          derive: (() throws -> SecureBytes) throws -> SecureBytes) throws -> OpenedKey {
        guard signature != .invalid else {
            throw ArchiveError.damaged(archive: name, what: "its header was changed after it was signed (\(EntryName.headerSignature) does not verify)")
        }
        func kek(_ kdf: ArchiveHeader.KDF, _ secret: SecureBytes) throws -> SecureBytes {
            func run() throws -> SecureBytes { try derive { try ArchiveKeys.portableKEK(password: secret, kdf: kdf) } }
            guard let kdfCache else { return try run() }
            return try kdfCache.kek(for: kdf, derive: run)
        }
        if header.version >= 2 {
            return try openSlots(password: password, keyStore: keyStore, identities: identities, kdfCeiling: kdfCeiling, kek: kek)
        }
        switch header.mode {
        case .portable:
            guard let kdf = header.kdf else { throw FormatError.invalidHeader("no kdf") }
            try kdfCeiling.check([kdf], archive: name)
            guard let secret = try password() else { throw ArchiveError.passwordNeeded }
            let key = try kek(kdf, secret)
            let contentKey: SecureBytes
            do { contentKey = try ArchiveKeys.unwrap(keyEntry, kek: key, header: header) }
            catch { throw ArchiveError.wrongPassword(archive: name) }
            let slot = ArchiveHeader.KeySlot.password(kdf, wrap: try ArchiveKeys.wrapInSlot(contentKey: contentKey, kek: key, archiveID: header.archiveID))
            return OpenedKey(key: contentKey, openedBy: .password, version1PasswordSlot: slot)
        case .secure:
            let store = try keyStore()
            guard let key = store.archiveKey(id: header.archiveID) else {
                throw ArchiveError.keyNotHere(archive: name, archiveID: header.archiveIDHex)
            }
            do { return OpenedKey(key: try ArchiveKeys.unwrap(keyEntry, kek: key, header: header), openedBy: .device) }
            catch { throw ArchiveError.damaged(archive: name, what: "the header or key wrap was changed") }
        }
    }

    /// Version 2 (FORMAT.md §4): tries the slots that need no prompt first (identities
    /// against recipient slots, the device key), then one password against each password
    /// slot. A slot that opens gives a content key only if the header MAC verifies under it.
    private func openSlots(password: () throws -> SecureBytes?, keyStore: () throws -> KeyStore,
                           identities: () throws -> [P256PrivateKey], kdfCeiling: KDFCeiling,
                           kek: (ArchiveHeader.KDF, SecureBytes) throws -> SecureBytes) throws -> OpenedKey {
        let id = header.archiveID
        func authenticated(_ contentKey: SecureBytes, _ openedBy: OpenedBy) throws -> OpenedKey {
            guard contentKey.count == 32, try ArchiveKeys.headerMACVerifies(keyEntry, contentKey: contentKey, header: header) else {
                throw ArchiveError.damaged(archive: name, what: "the header or its key slots were changed (header.mac does not verify)")
            }
            return OpenedKey(key: contentKey, openedBy: openedBy)
        }
        let recipientWraps = header.slots.compactMap { if case .recipient(let wrap) = $0 { return wrap } else { return nil } }
        if !recipientWraps.isEmpty {
            for identity in try identities() {
                for wrap in recipientWraps {
                    if let contentKey = try? AppleECIES.open(wrap, with: identity) { return try authenticated(contentKey, .recipient) }
                }
            }
        }
        if header.mode == .secure, case .device(let wrap)? = header.slots.first {
            let store = try keyStore()
            guard let key = store.archiveKey(id: id) else { throw ArchiveError.keyNotHere(archive: name, archiveID: header.archiveIDHex) }
            guard let contentKey = try? ArchiveKeys.unwrapSlot(wrap, kek: key, archiveID: id) else {
                throw ArchiveError.damaged(archive: name, what: "the device slot was changed")
            }
            return try authenticated(contentKey, .device)
        }
        let passwordSlots = header.slots.compactMap { slot -> (ArchiveHeader.KDF, [UInt8])? in
            if case .password(let kdf, let wrap) = slot { return (kdf, wrap) } else { return nil }
        }
        guard !passwordSlots.isEmpty else { throw ArchiveError.noKeyOpens(archive: name, recipientSlots: recipientWraps.count, passwordSlots: 0) }
        try kdfCeiling.check(passwordSlots.map(\.0), archive: name)
        guard let secret = try password() else {
            if recipientWraps.isEmpty { throw ArchiveError.passwordNeeded }
            throw ArchiveError.noKeyOpens(archive: name, recipientSlots: recipientWraps.count, passwordSlots: passwordSlots.count)
        }
        for (kdf, wrap) in passwordSlots {
            let key = try kek(kdf, secret)   // outside `try?`: an archive changed meanwhile is damage
            if let contentKey = try? ArchiveKeys.unwrapSlot(wrap, kek: key, archiveID: id) {
                return try authenticated(contentKey, .password)
            }
        }
        throw ArchiveError.wrongPassword(archive: name)
    }
}
