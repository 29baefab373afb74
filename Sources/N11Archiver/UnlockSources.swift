import N11Crypto
import N11Format
import N11System
import N11Vault

/// What may open archives during one command: a password, the home's key store (its device
/// keys and identities) and identity files. Each is gathered at most once, and only when an
/// archive needs it: a descriptor or command can be read only once, a person is asked once
/// (not once per archive), and a job with no password source never blocks on one. Every
/// command that opens archives (restore, verify, list, prune, unseal) gathers them here.
public final class UnlockSources {
    /// Reads the password, told the cost of one attempt (the archive's first password slot)
    /// so that a prompt can say it; nil when no source was given.
    private let readPassword: (ArchiveHeader.KDF?) throws -> SecureBytes?
    private let readKeyStore: () throws -> KeyStore
    private let keyStoreExists: () -> Bool
    private let readIdentityFiles: () throws -> [P256PrivateKey]
    /// Argon2id results with this one password, by salt and cost.
    public let kdfCache = KDFCache()
    /// Which signers the command trusts: checked before any key is tried (`unlock(with:)`).
    public var signerTrust = SignerTrust.anySigner
    /// Where an incremental archive's dependencies are looked for (by archive ID).
    public var dependencies: (any DependencyFinder)?

    private var password: SecureBytes??
    private var loadedKeyStore: KeyStore?
    private var cachedIdentities: [P256PrivateKey]?

    public init(password: @escaping (ArchiveHeader.KDF?) throws -> SecureBytes?, keyStore: @escaping () throws -> KeyStore,
                keyStoreExists: @escaping () -> Bool, identityFiles: @escaping () throws -> [P256PrivateKey]) {
        readPassword = password
        readKeyStore = keyStore
        self.keyStoreExists = keyStoreExists
        readIdentityFiles = identityFiles
    }

    /// The password (asked with the cost of `kdf` at the first archive that needs one).
    public func password(cost kdf: ArchiveHeader.KDF?) throws -> SecureBytes? {
        if let password { return password }
        let read = try readPassword(kdf)
        password = .some(read)
        return read
    }

    /// Forgets a password that turned out wrong, and the keys derived from it, so that the
    /// next need asks again and derives afresh.
    public func forgetPassword() {
        password = nil
        kdfCache.forget()
    }

    /// Whether a password was read already (a retry asks again only for a typed one).
    public var hasPassword: Bool { password != nil }

    public func keyStore() throws -> KeyStore {
        if let loadedKeyStore { return loadedKeyStore }
        let loaded = try readKeyStore()
        loadedKeyStore = loaded
        return loaded
    }

    /// The key store if one was loaded by now (by a secure archive or an identity).
    public var keyStoreIfLoaded: KeyStore? { loadedKeyStore }

    /// The key store's identities (a machine without a key store has none of its own), then
    /// those of the identity files.
    public func identities() throws -> [P256PrivateKey] {
        if let cachedIdentities { return cachedIdentities }
        let found = (keyStoreExists() ? try keyStore().identities : []) + (try readIdentityFiles())
        cachedIdentities = found
        return found
    }
}

extension ArchiveReader {
    /// `unlock` with what `sources` gathers: identities on recipient slots first, then the
    /// password (asked with this archive's cost), the key store for a secure archive. An
    /// archive that `sources.signerTrust` refuses is refused first, before any Argon2id or
    /// ECDH work and before a password is asked for.
    public func unlock(with sources: UnlockSources, kdfCeiling: KDFCeiling,
                       toleratingMissingItems: Bool = false) throws(ArchiveError) -> UnlockedArchive {
        try sources.signerTrust.check(signature, header: header, name: name)
        return try unlock(password: { try sources.password(cost: self.header.passwordKDFs.first) }, keyStore: sources.keyStore,
                          identities: sources.identities, kdfCeiling: kdfCeiling, kdfCache: sources.kdfCache,
                          toleratingMissingItems: toleratingMissingItems,
                          dependencies: sources.dependencies.map { finder in
                              { try self.openDependencies(finder, sources: sources, kdfCeiling: kdfCeiling, salvaging: toleratingMissingItems) }
                          })
    }

    /// Each archive `dependsOn` names, found by its ID (whatever its file name), checked to be
    /// what the ID says (an older version 3 archive of the same mode that does not depend on
    /// this one), held to the same signer rule, and opened with the same secrets. A missing
    /// one stops the read (66), or in a salvage leaves its items missing.
    func openDependencies(_ finder: any DependencyFinder, sources: UnlockSources, kdfCeiling: KDFCeiling,
                          salvaging: Bool) throws -> [OpenedDependency?] {
        try header.dependsOn.map { id -> OpenedDependency? in
            let candidates = try finder.candidates(for: id, salvaging: salvaging)
            var refusal: (any Error)? = nil
            for reader in candidates {
                do { return try open(reader, as: id, sources: sources, kdfCeiling: kdfCeiling) } catch { refusal = refusal ?? error }
            }
            // In a salvage, a dependency that is missing or does not open only loses the
            // items it holds.
            if salvaging { return nil }
            if let refusal { throw refusal }
            throw ArchiveError.dependencyMissing(archive: name, archiveID: id.hex, place: finder.location)
        }
    }

    /// One file that claims to be dependency `id`, opened if it is.
    private func open(_ reader: ArchiveReader, as id: [UInt8], sources: UnlockSources, kdfCeiling: KDFCeiling) throws -> OpenedDependency {
        let h = reader.header
        guard h.archiveID == id, h.version == 3, h.mode == header.mode, h.created <= header.created,
              !h.dependsOn.contains(header.archiveID), let entries = reader.packedEntries else {
            throw ArchiveError.damaged(archive: name, what: "'\(reader.name)' claims to be archive \(id.hex), which this one depends on, but is not an older archive of the same kind")
        }
        try sources.signerTrust.check(reader.signature, header: h, name: reader.name)
        let key = try reader.keyEntries.unwrapContentKey(password: { try sources.password(cost: h.passwordKDFs.first) },
                                                         keyStore: sources.keyStore, identities: sources.identities,
                                                         kdfCeiling: kdfCeiling, kdfCache: sources.kdfCache,
                                                         derive: reader.derivingWithoutContainer).key
        return OpenedDependency(reader: reader, contentKey: key, entries: entries)
    }
}
