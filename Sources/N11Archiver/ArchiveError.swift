import Glibc
import N11Container
import N11Crypto
import N11Format
import N11System
import N11Vault

/// The archiver's one error type. Every message names the archive (and the item, where
/// there is one) and never contains a password, key or plaintext.
public enum ArchiveError: CategorizedError, Sendable {
    case wrongPassword(archive: String)
    case keyNotHere(archive: String, archiveID: String)
    case damaged(archive: String, what: Damage)
    /// A salvage stopped: what authenticates the rest (header, key entry, manifest) is damaged.
    case unsalvageable(archive: String, what: Damage)
    case notAnArchive(archive: String, why: String)
    /// `unseal` of a file that is no FileLock package (`isPackage` false: its layout is not
    /// one), or of a package whose content fails (truncated, its tag).
    case fileLockPackage(path: String, what: String, isPackage: Bool)
    case unsupported(archive: String, why: String)
    case archiveMissing(path: String)
    /// A key file (public key, recipients list, identity) that is not there.
    case keyFileMissing(path: String)
    /// The archive path names a directory or device, not a file.
    case notAFile(path: String, what: String)
    case outputExists(path: String)
    /// Vault items of the archive's IDs that differ (their count and the first few IDs).
    case conflicts(ids: FirstFew)
    /// Files already in the export directory (their count and the first few paths).
    case exportConflicts(paths: FirstFew)
    /// An export directory (or its Photos/Notes folder) that is a link or another user's.
    case unsafeDestination(path: String, why: String)
    case passwordNeeded
    /// A version 2 archive none of whose slots opens with what is here: no identity matches
    /// its recipient slots and no password was given (or it has no password slot).
    case noKeyOpens(archive: String, recipientSlots: Int, passwordSlots: Int)
    /// A public or private key file that holds no usable P-256 key.
    case invalidKeyFile(path: String, why: String)
    /// A rekey that would leave the archive with no slot at all.
    case rekeyWouldLock(archive: String)
    /// A remote (rclone) operation failed; `location` is `REMOTE:PATH` (or the program).
    case remote(location: String, why: String, kind: FailureKind, hint: String?)
    /// An encrypted private key file that did not open with the passphrase given.
    case wrongPassphrase(path: String)
    /// A Ciphio message that did not open: a wrong password, or (GCM, CBC padding) a change.
    case messageNotOpened(source: String)
    /// A cbc or ctr Ciphio message to store, not allowed (`--allow-unauthenticated`).
    case unauthenticatedMessage(source: String, algorithm: String)
    /// A Ciphio message to store as a note that decrypted to bytes that are not UTF-8: from
    /// a cbc or ctr message (not authenticated) most likely a wrong password, from a gcm one
    /// (authentic) a message of something else than text.
    case messageNotText(source: String, algorithm: String)
    /// `verify --as-written`: this home has no record of writing that archive.
    case notWrittenHere(archive: String, archiveID: String)
    /// A trusted signer is required (`--signed-by`, the home's trusted signers) and this
    /// archive is not signed by one (DESIGN.md §8.4).
    case untrustedSigner(archive: String, SignerTrust.Refusal)
    /// A file given as a signer's public key (`key trust`, `--signed-by`) that holds none.
    case signerKeyFile(path: String, why: String)
    /// The home's list of trusted signers does not read.
    case trustedSignersDamaged(path: String, why: String)
    /// Under a trust rule, archives are there and none is signed by a trusted key.
    case noneTrusted(directory: String, count: Int)
    /// A key file that would replace an existing file (key files are never replaced).
    case keyFileExists(path: String)
    /// An incremental archive's dependency is not where the archive lies.
    case dependencyMissing(archive: String, archiveID: String, place: String)
    /// `rekey` of an archive signed by another key than this home's signing key.
    case signedElsewhere(archive: String, signer: String)
    /// The archive's Argon2id memory is above this machine's ceiling (`KDFCeiling`).
    case kdfAboveCeiling(archive: String, opsLimit: UInt64, memoryMiB: UInt64, ceilingMiB: UInt64)
    /// The Argon2id work of all its password slots together is above the ceiling (`KDFCeiling`).
    case kdfWorkAboveCeiling(archive: String, slots: Int, workMiBPasses: UInt64, ceilingMiBPasses: UInt64)
    /// More than one archive can hold (the reader's bounds, FORMAT.md §8).
    case tooLarge(String)
    case vaultItemDamaged(id: String, path: String)
    /// Item IDs or names given to select items that pick nothing (or, for one item, more).
    case selection(archive: String, ItemSelection.Problem)
    /// A salvage without the manifest's root (a copy cut short) or without some of its pages:
    /// a pattern that picks nothing among the `pagesRead` pages that read; the item may be on
    /// one that did not (`why`).
    case selectionInPagesRead(archive: String, ItemSelection.Problem, pagesRead: Int, why: String)
    /// prune: a file named as the newest archive does not read as one.
    case newestUnreadable(path: String)
    /// prune: deleting an archive failed after `deletedBefore` others were deleted.
    indirect case deleteFailed(ArchiveError, directory: String, deletedBefore: Int)
    /// prune: the newest archive did not verify (the cause), so nothing was deleted.
    case newestNotVerified(any CategorizedError)
    /// prune: every archive of the directory belongs to another user (the first's uid).
    case othersArchives(directory: String, count: Int, owner: UInt32)
    /// prune: archives are there but none is this home's.
    case noneOfThisHome(directory: String, count: Int)
    /// A local archive directory (`create --output-dir`, `prune`, `archives`) that is missing
    /// or no directory; `forPrune` for the messages of the commands that read it.
    case noArchiveDirectory(path: String, forPrune: Bool, exists: Bool)
    /// `create --output-dir`: every dated name of that second is taken (`fileName` -1…-1000).
    case noFreeName(directory: String, name: String)
    case vault(VaultError)
    case system(SystemError)
    /// The ZIP container failed to read or write.
    case container(ContainerError)
    /// A lock of an archive directory is held or cannot be used (`DirectoryLock`).
    case directoryLock(path: String, kind: FailureKind, why: String, hint: String?)
    /// A failure of a caller-supplied step (reading the password, say), or of a lower layer
    /// this one has no case for: kept as it was, so its kind, message and hint are the cause's.
    case caller(any CategorizedError)

    public var kind: FailureKind {
        switch self {
        case .wrongPassword, .keyNotHere, .noKeyOpens, .notWrittenHere, .wrongPassphrase, .messageNotOpened, .untrustedSigner, .noneTrusted: return .authentication
        // A wrong password for cbc and ctr, as `text decrypt` counts a message that does not open.
        case .messageNotText(_, let algorithm): return algorithm == "gcm" ? .other : .authentication
        case .damaged, .unsalvageable, .notAnArchive, .unsupported, .vaultItemDamaged, .fileLockPackage: return .damaged
        case .archiveMissing, .keyFileMissing, .notAFile, .dependencyMissing: return .missingInput
        case .outputExists, .conflicts, .exportConflicts, .keyFileExists: return .outputExists
        case .signerKeyFile: return .usage
        case .trustedSignersDamaged: return .configuration
        case .unsafeDestination: return .configuration
        case .passwordNeeded, .kdfAboveCeiling, .kdfWorkAboveCeiling, .invalidKeyFile, .rekeyWouldLock, .unauthenticatedMessage, .signedElsewhere: return .usage
        case .tooLarge: return .other
        case .selection(_, .prefixTooShort): return .usage
        case .selection, .selectionInPagesRead: return .missingInput
        case .newestUnreadable: return .damaged
        case .deleteFailed(let e, _, _): return e.kind
        case .newestNotVerified(let e): return e.kind
        case .othersArchives: return .configuration
        case .noneOfThisHome: return .authentication
        case .noArchiveDirectory: return .missingInput
        case .noFreeName: return .outputExists
        case .vault(let e): return e.kind
        case .system(let e): return e.kind
        case .container(let e): return e.kind
        case .directoryLock(_, let kind, _, _): return kind
        case .remote(_, _, let kind, _): return kind
        case .caller(let e): return e.kind
        }
    }

    public var description: String {
        switch self {
        case .wrongPassword(let a): return "wrong password for '\(a)' (or its header was changed)"
        case .keyNotHere(let a, let id):
            return "'\(a)' is a secure archive bound to the machine that made it: its key (archive \(id)) is not in this key store"
        case .damaged(let a, let what): return "'\(a)' is damaged or was tampered with: \(what)"
        case .unsalvageable(let a, let what): return "'\(a)' cannot be salvaged: \(what)"
        case .notAnArchive(let a, let why): return "'\(a)' is not an n11archive archive (\(why))"
        case let .fileLockPackage(path, what, isPackage):
            return isPackage ? "the FileLock package '\(path)' is damaged or was tampered with: \(what)"
                : "'\(path)' is not a FileLock package (\(what))"
        case .unsupported(let a, let why): return "'\(a)': \(why)"
        case .archiveMissing(let p): return "'\(p)' does not exist"
        case .keyFileMissing(let p): return "the key file '\(p)' does not exist"
        case let .notAFile(p, what): return "'\(p)' is \(what), not an archive file"
        case .outputExists(let p): return "'\(p)' already exists; nothing was written"
        case .conflicts(let ids):
            return "\(ids.count) item(s) in the vault differ from the archive's items of the same ID (\(ids.first.joined(separator: ", "))\(ids.count > ids.first.count ? ", …" : "")); nothing was restored"
        case .exportConflicts(let paths):
            return "\(paths.count) file(s) already exist in the export directory ('\(paths.first[0])'\(paths.count > 1 ? ", …" : "")); nothing was exported"
        case .unsafeDestination(let p, let why): return "'\(p)' \(why); nothing was exported"
        case .passwordNeeded: return "a portable archive needs a password and there is no terminal to ask for it"
        case let .notWrittenHere(a, id): return "this home has no record of writing '\(a)' (archive \(id))"
        case let .untrustedSigner(a, refusal): return "'\(a)' is refused: \(refusal); nothing was read from it"
        case let .signerKeyFile(p, why): return "'\(p)' is not a signer's public key file: \(why)"
        case let .trustedSignersDamaged(p, why): return "the home's list of trusted signers '\(p)' does not read: \(why)"
        case let .noneTrusted(d, n): return "none of the \(n) archive(s) in '\(d)' is signed by a trusted signer; nothing was deleted"
        case .keyFileExists(let p): return "'\(p)' already exists; key files are never replaced, and nothing was written"
        case let .dependencyMissing(a, id, place):
            return "'\(a)' is an incremental archive and needs archive \(id), which no archive file in '\(place)' is (none there reads with that ID)"
        case let .signedElsewhere(a, signer):
            return "'\(a)' is signed by key \(signer), which is not this home's signing key, and a new header needs a new signature by its signer; nothing was changed"
        case let .messageNotOpened(source): return "the message in \(source) does not open: a wrong password, or the message was changed"
        case let .unauthenticatedMessage(source, algorithm):
            return "\(source) is a \(algorithm) message, which is not authenticated: a change to it, or a wrong password, cannot be detected; nothing was added"
        case let .messageNotText(source, algorithm) where algorithm == "gcm":
            return "the message in \(source) opened, but what it holds is not UTF-8 text, so it cannot be a note; nothing was added"
        case let .messageNotText(source, algorithm):
            return "the \(algorithm) message in \(source) decrypted to bytes that are not UTF-8 text: most likely a wrong password (a \(algorithm) message is not authenticated, so a wrong one can give bytes instead of an error); nothing was added"
        case let .wrongPassphrase(p): return "wrong passphrase for the private key '\(p)' (or the file was damaged)"
        case let .remote(location, why, _, _): return "\(location): \(why)"
        case let .rekeyWouldLock(a): return "that would leave '\(a)' with no password and no recipient: nobody could open it; nothing was changed"
        case let .invalidKeyFile(p, why): return "'\(p)' is not a usable P-256 key file: \(why)"
        case let .noKeyOpens(a, recipients, passwords):
            var kinds: [String] = []
            if recipients > 0 { kinds.append("\(recipients) recipient slot(s) (P-256 public keys)") }
            if passwords > 0 { kinds.append("\(passwords) password slot(s)") }
            let what = recipients > 0 ? "no identity here opens it" : "nothing here opens it"
            return "'\(a)' has \(kinds.joined(separator: " and ")); \(what)"
        case let .kdfAboveCeiling(a, ops, memory, ceiling):
            return "'\(a)' asks for Argon2id with \(memory) MiB and \(ops) passes per password attempt, above this machine's ceiling of \(ceiling) MiB; its password was not asked for"
        case let .kdfWorkAboveCeiling(a, slots, work, ceiling):
            return "'\(a)' asks for Argon2id work of \(work) MiB × passes over its \(slots) password slots, above this machine's ceiling of \(ceiling); its password was not asked for"
        case .tooLarge(let what): return "too much for one archive: \(what); nothing was written"
        case let .selection(a, problem): return problem.description(in: "'\(a)'")
        case let .selectionInPagesRead(a, problem, pages, why):
            return problem.description(in: "the \(pages) manifest page(s) of '\(a)' that read")
                + ": \(why), so what other pages held cannot be found"
        case .vaultItemDamaged(let id, let path): return "vault item \(id) ('\(path)') failed authentication; no archive was written"
        case .newestUnreadable(let p):
            return "the newest archive '\(p)' does not read as an n11archive archive, so nothing was deleted"
        case .deleteFailed(let e, _, let before): return "\(e.description) (\(before) older archive(s) were deleted before this)"
        case .newestNotVerified(let e): return "the newest archive did not verify, so nothing was deleted: \(e.description)"
        case let .othersArchives(directory, count, owner):
            return "the \(count) archive(s) in '\(directory)' belong to uid \(owner), not to you (uid \(geteuid())), so nothing was deleted"
        case let .noneOfThisHome(directory, count):
            return "none of the \(count) archive(s) in '\(directory)' is this home's (written here, or opening with this password or key store), so nothing was deleted"
        case let .noFreeName(directory, name):
            return "1000 archives named for \(name) already exist in '\(directory)'; nothing was written"
        case let .noArchiveDirectory(path, forPrune, exists):
            return "\(forPrune ? "the archive directory" : "the output directory") '\(path)' \(exists ? "is not a directory" : "does not exist"); \(forPrune ? "nothing was deleted" : "nothing was written")"
        case .vault(let e): return e.description
        case .system(let e): return e.description
        case .container(let e): return e.description
        case .directoryLock(_, _, let why, _): return why
        case .caller(let e): return e.description
        }
    }

    public var hint: String? {
        switch self {
        case .wrongPassword: return "check the password; an archive's password cannot be recovered"
        case .keyNotHere: return "restore it on that machine (or with its --home); portable archives restore anywhere"
        case .fileLockPackage(_, _, let isPackage):
            return isPackage ? "use another copy of the package; nothing was written"
                : "unseal opens what `seal` or FileLock made; an archive (.nu11vlt) is opened with `n11archive restore`; nothing was written"
        case .damaged: return "use another copy of the archive; nothing was written (`restore --salvage` restores every item that verifies, if the header and manifest are intact)"
        case .unsalvageable:
            return "a salvage needs the archive's header.json, its second entry and its manifest intact (they authenticate every item): use another copy of the archive; nothing was written"
        case .archiveMissing: return "check the archive's path and name; nothing was changed"
        case .keyFileMissing: return "check the key file's path (`n11archive key export-public -o FILE` writes a public key, `key export-private` an identity); nothing was changed"
        case .notAFile: return "give the path of a .nu11vlt file (`n11archive archives DIR` lists the archives in a directory)"
        case .outputExists: return "pass --force to replace it, or choose another path"
        case .conflicts: return "pass --overwrite to replace them with the archive's versions"
        case .exportConflicts: return "export into an empty directory, or pass --overwrite"
        case .unsafeDestination: return "export into a directory of your own that is not reached through a symbolic link (another user could read or redirect the plaintext)"
        case .dependencyMissing: return "put the archives it was made with beside it, as *.nu11vlt files of any name (they are found by the ID in their header; `n11archive archives DIR --json` shows each one's archiveId), or restore what is there with --salvage"
        case .signedElsewhere: return "rekey it in the home that signed it, or add --drop-signature to make the result unsigned"
        case .untrustedSigner(_, let refusal): return refusal.hint
        case .signerKeyFile: return "give the signing key's public half, as `n11archive key export-public --signing -o FILE` writes it in the home that signs (a PEM PUBLIC KEY block, or 64 hex digits a line)"
        case .trustedSignersDamaged: return "remove the file and trust the signers again (`n11archive key trust KEYFILE`), or use --signed-by KEYFILE for one command"
        case .noneTrusted: return "`n11archive archives DIR` shows who signed each; trust their signer with `n11archive key trust KEYFILE`, or prune with --no-signer-check to count by records and passwords instead"
        case .keyFileExists: return "choose another name, or remove the old file first if you no longer need it"
        case .notWrittenHere: return "records are kept by `create` in the home that made the archive (HOME/written/); use that home (--home), or verify with the key that opens it"
        case .messageNotOpened: return "check the password the message was made with; nothing was written"
        case .unauthenticatedMessage: return "read it first with `n11archive text decrypt`; if it is right, add it with --allow-unauthenticated"
        case .messageNotText(_, let algorithm) where algorithm == "gcm":
            return "to keep its bytes as they are, without a plaintext copy on disk: `n11archive text decrypt FILE | n11archive vault add - --name NAME`"
        case .messageNotText: return "check the password the message was made with (`n11archive text decrypt` shows what it gives)"
        case .wrongPassphrase: return "give the passphrase chosen at `n11archive key export-private` (--passphrase-file FILE, or on a terminal)"
        case .remote(_, _, _, let hint): return hint
        case .rekeyWouldLock: return "add a password (--add-password) or a recipient (--add-recipient FILE) in the same rekey"
        case .invalidKeyFile: return "public keys are PEM files as `n11archive key export-public` or FileLock write them (or a SubjectPublicKeyInfo PEM); private keys are PKCS#8 PEM as `key export-private` writes them"
        case let .noKeyOpens(_, _, passwords):
            let identity = "it opens with the private key of a recipient it was made for: pass --identity FILE, or import the key with `n11archive key import FILE`"
            return passwords > 0 ? identity + ", or give the password (--password-file, --password-fd, --password-command)" : identity
        case .passwordNeeded: return "give it with --password-file FILE (mode 0600), --password-fd N, --password-command CMD or N11_PASSWORD_FILE"
        case .selection(let a, let problem): return problem.hint(listing: "n11archive list '\(a)'")
        case .selectionInPagesRead(let a, _, _, _):
            return "restore it from a whole copy of the archive; `n11archive restore '\(a)' --salvage --export DIR --dry-run --json` lists the items this copy holds (`restored`), writing nothing"
        case .tooLarge: return "archive the compartments separately (--compartment), or prune the vault"
        case let .kdfAboveCeiling(_, _, memory, _):
            return "if you made this archive with that cost, allow it with --allow-kdf-memory \(memory) (or N11_ALLOW_KDF_MEMORY=\(memory)); a file planted by someone else can ask for this to slow an unattended job down"
        case let .kdfWorkAboveCeiling(_, _, work, _):
            let memory = (work + KDFCeiling.passesAtCeiling - 1) / KDFCeiling.passesAtCeiling
            return "if you made this archive with that cost, allow it with --allow-kdf-memory \(memory) (the work ceiling is \(KDFCeiling.passesAtCeiling) passes at that memory); a file planted by someone else can ask for this to slow an unattended job down"
        case .vaultItemDamaged: return "remove or restore that item (`n11archive vault rm`), then create the archive again"
        case .newestUnreadable(let p):
            return "check it with `n11archive info '\(p)'`; make a new archive with `n11archive create --output-dir` (or move the damaged file out of the directory), then prune again"
        case .deleteFailed(let e, let directory, _): return e.hint ?? "check the permissions of '\(directory)' and run prune again"
        case .newestNotVerified(let e):
            let pruneHint = "make a new archive with `n11archive create --output-dir` so that the newest one is sound, then prune again; `n11archive verify` checks the older ones"
            return e.kind == .damaged ? pruneHint : (e.hint ?? pruneHint)
        case .othersArchives:
            return "run prune as the user who owns them; on a network or Windows mount, mount it with your uid (uid=, idmap) so that the files are yours"
        case .noneOfThisHome:
            return "check the password (or --home for secure archives); archives of another home in the same directory, and archives that only a recipient's identity opens, are never touched (after a disaster, `n11archive verify --adopt` takes your old archives back as this home's)"
        case .noFreeName: return "prune the directory or write somewhere else"
        case let .noArchiveDirectory(path, forPrune, exists):
            switch (forPrune, exists) {
            case (true, false): return "give the directory that `create --output-dir` writes to"
            case (true, true): return "give the directory that `create --output-dir` writes to, not a file in it"
            case (false, false): return "create it first (mkdir -p '\(path)'), or fix the path"
            case (false, true): return "give a directory (the archive's name is chosen for you), or use -o FILE"
            }
        case .vault(let e): return e.hint
        case .system(let e): return e.hint
        case .container(let e): return e.hint
        case .directoryLock(_, _, _, let hint): return hint
        case .caller(let e): return e.hint
        default: return nil
        }
    }

    /// Translates a failure while exporting into `destination`.
    static func writing(_ destination: String, _ error: any Error) -> ArchiveError {
        switch error {
        case let e as ArchiveError: return e
        case ExportRefusal.symbolicLink(let path):
            return .unsafeDestination(path: path, why: "is a symbolic link, which n11archive does not follow when it writes plaintext")
        case ExportRefusal.conflicts(let path): return .exportConflicts(paths: FirstFew([path]))
        case PrivatePermissions.Violation.wrongOwner(let path, let owner):
            return .unsafeDestination(path: path, why: "belongs to uid \(owner), not to you (uid \(geteuid()))")
        case let e as SystemError: return .system(e)
        case let e as CategorizedError: return .caller(e)
        default: return .caller(UnclassifiedError(error, context: "cannot export into '\(destination)'"))
        }
    }

    /// Keeps a lower layer's error as it is, inside this layer's type.
    static func wrap(_ error: any Error) -> ArchiveError {
        switch error {
        case let e as ArchiveError: return e
        case let e as VaultError: return .vault(e)
        case let e as SystemError: return .system(e)
        case let e as CategorizedError: return .caller(e)
        default: return .caller(UnclassifiedError(error, context: nil))
        }
    }

    /// Translates a failure while creating the archive `output`.
    static func creating(_ output: String, _ error: any Error) -> ArchiveError {
        switch error {
        case let e as ArchiveError: return e
        case VaultError.itemDamaged(let id, let path): return .vaultItemDamaged(id: id, path: path)
        case let e as VaultError: return .vault(e)
        case let e as SystemError: return .system(e)
        case let e as ContainerError: return .container(e)
        case let e as CategorizedError: return .caller(e)
        default: return .caller(UnclassifiedError(error, context: "cannot create '\(output)'"))
        }
    }

    /// Translates a lower layer's failure while reading `archive`. In a salvage, damage that
    /// still stops the archive is `unsalvageable` (its hint cannot be "use --salvage").
    static func reading(_ archive: String, _ error: any Error, salvaging: Bool) -> ArchiveError {
        let translated = reading(archive, error)
        if salvaging, case .damaged(let a, let what) = translated { return .unsalvageable(archive: a, what: what) }
        return translated
    }

    /// Translates a lower layer's failure while reading `archive`.
    static func reading(_ archive: String, _ error: any Error) -> ArchiveError {
        switch error {
        case let e as ArchiveError: return e
        case let e as FormatError:
            if case .unsupportedVersion = e { return .unsupported(archive: archive, why: e.description) }
            if case .notAnArchive(let why) = e { return .notAnArchive(archive: archive, why: why) }
            return .damaged(archive: archive, what: .format(e))
        case let e as ContainerError: return .damaged(archive: archive, what: .container(e))
        case let e as CryptoError:
            switch e {
            case .authenticationFailed, .truncated, .trailingData, .contentMismatch, .invalidParameter:
                return .damaged(archive: archive, what: .crypto(e))
            default: return .caller(e)
            }
        case let e as VaultError: return .vault(e)
        case let e as SystemError: return .system(e)
        case let e as CategorizedError: return .caller(e)
        default: return .damaged(archive: archive, what: "\(error)")
        }
    }
}


extension ArchiveError {
    /// A failure while reading one item, naming it.
    static func itemFailed(archive: String, id: String, _ error: any Error) -> ArchiveError {
        // The archive's key opened its header and manifest already: a tag that fails in an
        // item is that item's bytes, never "a wrong key".
        if case CryptoError.authenticationFailed = error {
            return .damaged(archive: archive, what: .item(id: id, "failed authentication (the archive's key is right: this item's bytes were changed or damaged)"))
        }
        let translated = reading(archive, error)
        if case .damaged(let a, let what) = translated { return .damaged(archive: a, what: .item(id: id, what)) }
        return translated
    }
}

/// What is damaged in an archive, kept as a value: the lower layer's error as it was
/// (format, container, crypto), what this layer found, or that within one item.
/// A string literal is a `found`.
public enum Damage: Sendable, CustomStringConvertible, ExpressibleByStringInterpolation {
    case found(String)
    case format(FormatError)
    case container(ContainerError)
    case crypto(CryptoError)
    indirect case item(id: String, Damage)

    public init(stringLiteral value: String) { self = .found(value) }
    public init(stringInterpolation: DefaultStringInterpolation) { self = .found(String(stringInterpolation: stringInterpolation)) }

    public var description: String {
        switch self {
        case .found(let what): return what
        case .format(let e): return e.description
        case .container(let e): return e.description
        case .crypto(let e): return e.description
        case let .item(id, inner):
            // "item X failed authentication (…)", "item X: the content does not match …"
            if case .found(let what) = inner, what.hasPrefix("failed ") { return "item \(id) \(what)" }
            return "item \(id): \(inner)"
        }
    }

    /// What is wrong within the item, for a message that names the item already.
    public var withinItem: Damage {
        if case .item(_, let inner) = self { return inner }
        return self
    }
}

/// How many of something there were and the first few of them: what a message names of a
/// list that may run to millions (conflicts in a restore of millions of items, issue 34).
public struct FirstFew: Sendable, Equatable {
    /// What a message shows.
    public static let kept = 3
    public private(set) var count = 0
    public private(set) var first: [String] = []

    public init(_ values: [String] = []) { for value in values { append(value) } }

    public var isEmpty: Bool { count == 0 }

    public mutating func append(_ value: String) {
        if first.count < Self.kept { first.append(value) }
        count += 1
    }
}
