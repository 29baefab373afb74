import Glibc
import N11Crypto
import N11Format
import N11System

/// The vault and key-store layer's one error type. Messages name the file or item and never
/// contain key, PIN or item bytes.
public enum VaultError: CategorizedError, Sendable {
    case notInitialized(home: String)
    case alreadyInitialized(path: String)
    case unsafePermissions(String)
    case keyStoreDamaged(path: String, reason: String)
    case keyStoreLocked(path: String)          // sealed with a PIN and no PIN was given
    case wrongPIN(path: String)
    /// A key store backup (`key backup`) that does not open with the passphrase given.
    case wrongBackupPassphrase(path: String)
    case pinRejected(String)
    case vaultMismatch(vault: String, keyStore: String)
    /// A restore onto a home without a key store, into an existing vault made by another key
    /// store (the key store this restore created was removed again).
    case vaultNeedsItsKeyStore(vault: String, home: String)
    case notAVault(path: String)
    /// A vault to read that does not exist.
    case vaultMissing(path: String)
    case inputMissing(path: String)
    case inputNotRegularFile(path: String, what: String)
    /// A directory given to add: not walked (the hint says how to add its files).
    case inputIsDirectory(path: String)
    case inputUnreadable(path: String, reason: String)
    case noteNotText(path: String)
    case noteTooLarge(path: String, limit: Int)
    case itemNotFound(id: String, vault: String)
    case ambiguousID(prefix: String, matches: Int)
    /// An ID prefix shorter than `ItemSelection.minimumPrefixLength`.
    case prefixTooShort(String)
    case itemDamaged(id: String, path: String)
    /// The item's row is there but its content file is not.
    case contentMissing(id: String, path: String)
    case itemExpired(id: String)
    case outputExists(path: String)
    case busy(lock: String, holder: Int32?)
    case invalidDuration(String)
    case invalidCompartmentUse(String)
    case invalidName(String)
    /// A secure archive's items were sealed under a compartment key that a rotation retired
    /// and `--forget-retired` then forgot.
    case compartmentKeyForgotten(compartment: Compartment, keyStore: String)
    /// Sealed under a compartment key this key store never had (another key store's).
    case compartmentKeyUnknown(compartment: Compartment, keyStore: String)
    /// `vault rotate-keys` re-encrypts every item, so records that open under no key stop it.
    case rotationBlockedByDamage(ids: [String])
    /// Not enough free space for a change that writes everything anew before it commits.
    case notEnoughSpace(path: String, needed: Int64, available: Int64)
    /// The change was committed (journaled) but not fully applied; the next writer finishes it.
    case commitPending(vault: String, cause: String)
    /// The catalogue file is not a database SQLite can read, or its contents are damaged.
    case catalogueDamaged(path: String, reason: String)
    /// A catalogue written by a later n11archive, in a format this one does not know.
    case catalogueTooNew(path: String)
    case system(SystemError)
    case crypto(CryptoError)
    /// Anything else from below, with its own kind (never dressed up as an errno).
    /// A failure of a caller-supplied step (reading the PIN, say) or of no known layer, kept
    /// as it was: its kind, message and hint are the cause's.
    case caller(any CategorizedError)

    public var kind: FailureKind {
        switch self {
        case .notInitialized, .unsafePermissions: return .configuration
        case .alreadyInitialized, .outputExists: return .outputExists
        case .keyStoreDamaged, .itemDamaged, .contentMissing, .catalogueDamaged: return .damaged
        case .catalogueTooNew: return .configuration
        case .keyStoreLocked, .wrongPIN, .wrongBackupPassphrase, .vaultMismatch, .vaultNeedsItsKeyStore,
             .compartmentKeyForgotten, .compartmentKeyUnknown: return .authentication
        case .rotationBlockedByDamage: return .damaged
        case .notEnoughSpace: return .ioFailure
        case .pinRejected, .invalidDuration, .invalidCompartmentUse, .invalidName, .prefixTooShort: return .usage
        case .notAVault, .inputNotRegularFile, .inputIsDirectory, .noteNotText, .noteTooLarge: return .other
        case .inputMissing, .vaultMissing, .itemNotFound, .ambiguousID, .itemExpired: return .missingInput
        case .inputUnreadable: return .ioFailure
        case .busy: return .busy
        case .commitPending: return .ioFailure
        case .system(let e): return e.kind
        case .crypto(let e): return e == .authenticationFailed ? .damaged : e.kind
        case .caller(let e): return e.kind
        }
    }

    public var description: String {
        switch self {
        case .notInitialized(let home): return "no key store in '\(home)'"
        case .alreadyInitialized(let path): return "a key store already exists at '\(path)'; it was left untouched"
        case .unsafePermissions(let what): return what
        case .keyStoreDamaged(let path, let reason): return "the key store '\(path)' is damaged (\(reason)); it was left untouched"
        case .keyStoreLocked(let path): return "the key store '\(path)' is protected by a PIN and none was given"
        case .wrongPIN(let path): return "wrong PIN for the key store '\(path)'; nothing was changed"
        case .wrongBackupPassphrase(let path): return "wrong passphrase for the key store backup '\(path)' (or it was changed); nothing was changed"
        case .pinRejected(let why): return why
        case .vaultMismatch(let vault, let keyStore): return "the vault '\(vault)' was not made with the key store '\(keyStore)'"
        case let .vaultNeedsItsKeyStore(vault, home):
            return "the vault '\(vault)' was made with another key store, and '\(home)' has none; nothing was restored and no key store was left behind"
        case .notAVault(let path): return "'\(path)' exists but is not an n11archive vault"
        case .vaultMissing(let path): return "there is no vault at '\(path)'"
        case .inputMissing(let path): return "'\(path)' does not exist"
        case .inputNotRegularFile(let path, let what): return "'\(path)' is \(what), not a regular file"
        case .inputIsDirectory(let path): return "'\(path)' is a directory; nothing was added"
        case .inputUnreadable(let path, let reason): return "cannot read '\(path)': \(reason)"
        case .noteNotText(let path): return "'\(path)' is not UTF-8 text, so it cannot be a note"
        case .noteTooLarge(let path, let limit): return "'\(path)' is larger than the \(limit >> 20) MiB a note may hold"
        case .itemNotFound(let id, let vault): return "no item '\(id)' in the vault '\(vault)'"
        case .ambiguousID(let prefix, let matches): return "'\(prefix)' matches \(matches) items"
        case .prefixTooShort(let prefix): return ItemSelection.Problem.prefixTooShort(prefix).description(in: "the vault")
        case .itemDamaged(let id, let path): return "item \(id) ('\(path)') failed authentication: it is damaged or was modified; nothing was written"
        case .contentMissing(let id, let path): return "item \(id) has no content file ('\(path)' is missing); nothing was written"
        case .itemExpired(let id): return "item \(id) has expired (fade)"
        case .outputExists(let path): return "'\(path)' already exists"
        case .busy(let lock, let holder):
            let who = holder.map { "process \($0)" } ?? "another process"
            return "\(who) is using this vault or key store (lock '\(lock)')"
        case .invalidDuration(let text): return "'\(text)' is not a duration"
        case .invalidCompartmentUse(let why): return why
        case .invalidName(let why): return why
        case .compartmentKeyForgotten(let compartment, let keyStore):
            return "the \(compartment.rawValue) key these items were sealed under was retired by `vault rotate-keys` and then forgotten (--forget-retired) in '\(keyStore)'"
        case .compartmentKeyUnknown(let compartment, let keyStore):
            return "these items were sealed under a \(compartment.rawValue) key that the key store '\(keyStore)' never held"
        case .rotationBlockedByDamage(let ids):
            let shown = ids.prefix(5).joined(separator: ", ") + (ids.count > 5 ? ", …" : "")
            return "\(ids.count) item record(s) do not open (\(shown)); a key rotation re-encrypts every item and would leave them behind, so nothing was changed"
        case .notEnoughSpace(let path, let needed, let available):
            return "'\(path)' has \(available >> 20) MiB free and this needs \(needed >> 20) MiB (every item is written anew before the old copies go); nothing was changed"
        case .commitPending(let vault, let cause):
            return "the change to '\(vault)' was committed but could not be completed (\(cause))"
        case let .catalogueDamaged(path, reason): return "the vault catalogue '\(path)' is damaged (\(reason)); nothing was changed"
        case .catalogueTooNew(let path): return "the vault catalogue '\(path)' was written by a newer n11archive"
        case .system(let e): return e.description
        case .crypto(let e): return e.description
        case .caller(let e): return e.description
        }
    }

    public var hint: String? {
        switch self {
        case .notInitialized: return "run `n11archive init` first, or point --home at an existing key store"
        case .alreadyInitialized: return "use another --home for a second key store"
        case .vaultNeedsItsKeyStore: return "restore into a new directory (--vault DIR), or use the home whose key store made that vault (--home)"
        case .vaultMissing: return "check the path given with --vault, if one was (else the home's own vault is missing: --home or N11_HOME may name another home); `vault add` and `restore` create a vault there"
        case .keyStoreDamaged: return "restore the key store file from your own backup of it; archives made in portable mode restore with their password alone"
        case .keyStoreLocked: return "give the PIN with --pin-file FILE, --pin-fd N or N11_PIN_FILE (a cron or systemd job: Environment=N11_PIN_FILE=…, a 0600 file), or run on a terminal to be asked"
        case .wrongPIN: return "check the PIN and try again"
        case .wrongBackupPassphrase: return "use the passphrase given to `n11archive key backup` when the backup was made"
        case .vaultMismatch: return "use the --home whose key store made this vault, or --vault to choose another vault"
        case .notAVault: return "choose an empty or new directory with --vault"
        case .inputMissing(let path):
            // A list written on Windows (`--files-from`) ends each path in a carriage return,
            // and a stray space is as invisible in the message.
            if path.hasSuffix("\r") {
                return "the path ends in a carriage return: is the list a Windows (CR LF) file? `sed -i 's/\\r$//' LIST` makes it one path a line; nothing was added"
            }
            if path.hasSuffix(" ") { return "the path ends in a space: check the list or the quoting; nothing was added" }
            return "check the path; nothing was added"
        case .inputIsDirectory(let path):
            // Quoted for a POSIX shell, so that it can be pasted whatever the name holds.
            let quoted = "'" + path.replacingOccurrences(of: "'", with: "'\\''") + "'"
            return "a directory is not walked; add the files in it (with the same options) by: find \(quoted) -type f -print0 | n11archive vault add --null --files-from -"
        case .inputNotRegularFile: return "only regular files can be added; nothing was added"
        case .noteNotText: return "nothing was added; a note holds UTF-8 text only (a file of other bytes can be added on its own, as `vault add FILE` without --note, and is kept as it is)"
        case .noteTooLarge: return "nothing was added; a larger file can be added on its own, as `vault add FILE` without --note (any size, streamed)"
        case .itemNotFound: return "`n11archive vault list` shows the IDs"
        case .ambiguousID: return "give the item's ID, or enough of it to be unique (`n11archive vault list` shows the IDs and names)"
        case .prefixTooShort: return "give at least \(ItemSelection.minimumPrefixLength) characters of the ID (`n11archive vault list` shows them)"
        case .itemDamaged, .contentMissing: return "restore this item from an archive (`n11archive restore`)"
        case .outputExists: return "choose another path or pass --force to replace it"
        case .busy: return "wait for it to finish, or pass --lock-wait SECONDS"
        case .compartmentKeyForgotten: return "a key store backup made before the keys were forgotten (`n11archive key backup`) still holds them; portable and recipient archives do not need them"
        case .compartmentKeyUnknown: return "restore it with the --home whose key store made it"
        case .rotationBlockedByDamage: return "restore those items from an archive, or remove them with `n11archive vault rm ID`, then rotate"
        case .notEnoughSpace: return "free some space, or rotate one compartment at a time with --compartment"
        case .catalogueDamaged: return "restore the vault from your latest archive into a new directory (`n11archive restore FILE --vault NEW`), and keep this one until that has worked"
        case .catalogueTooNew: return "use that newer n11archive with this vault"
        case .commitPending: return "do not repeat the command: the next n11archive command that changes this vault completes it (e.g. `n11archive vault purge`)"
        case .invalidDuration: return "use a number with a unit: 90s, 30m, 12h, 7d or 2w"
        case .system(let e): return e.hint
        case .caller(let e): return e.hint
        default: return nil
        }
    }
}

extension VaultError {
    /// Translates lower layers' errors into this layer's, keeping their meaning.
    static func wrap(_ error: any Error) -> VaultError {
        switch error {
        case let e as VaultError: return e
        // SQLite's "not a database" and "damaged" (SQLiteDatabase maps them to EBADMSG, as
        // a file that does not parse): the catalogue is the only database the vault opens.
        case let e as SystemError where e.errno == EBADMSG: return .catalogueDamaged(path: e.path ?? "", reason: e.operation)
        case let e as SystemError: return .system(e)
        case let e as CryptoError: return .crypto(e)
        case let e as PrivatePermissions.Violation: return .unsafePermissions(e.description)
        case let e as CategorizedError: return .caller(e)
        default: return .caller(UnclassifiedError(error, context: nil))
        }
    }
}

