import Foundation
import Glibc
import Testing
import N11Archiver
import N11Container
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

// Helpers shared by the archive tests: vaults and key stores, archive pipelines (create /
// unlock / verify / restore / export), a way to assert which ArchiveError case was thrown,
// and directory snapshots. Temp directories, file bytes, listings, random bytes, secret()
// and CollectingSink come from N11TestSupport.

// MARK: files

func makeDirectory(_ path: String) throws {
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
}

/// A failed digest gives a string no real digest equals, so the comparison using it fails.
func sha256Hex(_ bytes: [UInt8]) -> String { (try? SHA256Digest.hash(bytes).hex) ?? "SHA-256 failed" }

/// What a directory tree holds: relative path → "dir" or "file <sha256>" (or "link …").
/// The vault's `.lock` is ignored: opening a vault for writing creates it and writes a PID.
typealias Snapshot = [String: String]

func snapshot(_ root: String) -> Snapshot {
    var result: Snapshot = [:]
    guard exists(root) else { return result }
    guard let enumerator = FileManager.default.enumerator(atPath: root) else { return result }
    while let relative = enumerator.nextObject() as? String {
        if relative == ".lock" || relative.hasSuffix("/.lock") { continue }
        let full = root + "/" + relative
        var st = stat()
        guard lstat(full, &st) == 0 else { continue }
        switch st.st_mode & S_IFMT {
        case S_IFDIR: result[relative] = "dir"
        case S_IFREG: result[relative] = "file " + ((try? sha256Hex(readBytes(full))) ?? "unreadable")
        default: result[relative] = "other \(st.st_mode)"
        }
    }
    return result
}

/// Describes how two snapshots differ (for failure messages).
func difference(_ before: Snapshot, _ after: Snapshot) -> String {
    var lines: [String] = []
    for key in Set(before.keys).union(after.keys).sorted() where before[key] != after[key] {
        lines.append("\(key): \(before[key] ?? "absent") → \(after[key] ?? "absent")")
    }
    return lines.joined(separator: "; ")
}

// MARK: keys, vaults, archives

let fastKDF = try! Argon2Parameters(opsLimit: 1, memoryBytes: 8 << 20)
let testPassword = "correct horse battery staple"

/// A home `dir/name` with a fresh unsealed key store, and its vault opened for writing.
func makeVault(in dir: String, name: String) throws -> (KeyStore, Vault) {
    let home = N11Home(root: dir + "/" + name)
    let store = try KeyStore.create(in: home, pin: nil)
    let vault = try Vault.open(at: home.defaultVaultPath, keyStore: store, forWriting: true)
    return (store, vault)
}

func photo(_ bytes: [UInt8], name: String, compartment: Compartment = .vault, expires: Date? = nil) -> Vault.NewItem {
    Vault.NewItem(source: MemorySource(bytes), kind: .photo, name: name, compartment: compartment, expires: expires)
}

func note(_ bytes: [UInt8], name: String, compartment: Compartment = .vault, expires: Date? = nil) -> Vault.NewItem {
    Vault.NewItem(source: MemorySource(bytes), kind: .note, name: name, compartment: compartment, expires: expires)
}

@discardableResult
func createArchive(from vault: Vault, mode: ArchiveMode, to output: String,
                   compartments: Set<Compartment> = [.vault, .fade], replaceExisting: Bool = false,
                   kdf: Argon2Parameters = fastKDF, now: Date = Date(),
                   password: String = testPassword, formatVersion: Int = ArchiveHeader.currentVersion) throws -> ArchiveCreator.Report {
    try ArchiveCreator.create(from: vault, .init(mode: mode, compartments: compartments, output: output,
                                                 replaceExisting: replaceExisting, kdf: kdf, now: now, formatVersion: formatVersion)) {
        try secret(password)
    }
}

struct NoKeyStore: Error {}

/// Opens and authenticates an archive the way the CLI does.
func unlock(_ path: String, password: String = testPassword, keyStore: KeyStore?) throws -> UnlockedArchive {
    let reader = try ArchiveReader(path: path)
    return try reader.unlock(password: { try secret(password) }, keyStore: {
        guard let keyStore else { throw NoKeyStore() }
        return keyStore
    })
}

func plaintext(of item: ItemMetadata, in vault: Vault) throws -> [UInt8] {
    let sink = CollectingSink()
    try vault.read(item, into: sink)
    return sink.bytes
}

/// The vault's items as stored on disk (a fresh read-only instance, so nothing cached),
/// by ID.
func storedItems(of vaultPath: String, keyStore: KeyStore) throws -> [String: ItemMetadata] {
    let vault = try Vault.open(at: vaultPath, keyStore: keyStore, forWriting: false)
    return Dictionary(uniqueKeysWithValues: try vault.items(includeExpired: true).map { ($0.id, $0) })
}

/// Checks that `restored` holds exactly the items of `original` (by ID) with the same
/// descriptive metadata and the given plaintexts.
func expectSameItems(_ original: [String: ItemMetadata], _ restored: [String: ItemMetadata],
                     plaintexts: [String: [UInt8]], restoredVault: Vault,
                     sourceLocation: SourceLocation = #_sourceLocation) throws {
    #expect(Set(restored.keys) == Set(original.keys), sourceLocation: sourceLocation)
    for (id, old) in original {
        guard let new = restored[id] else { continue }
        #expect(new.name == old.name, sourceLocation: sourceLocation)
        #expect(new.kind == old.kind, sourceLocation: sourceLocation)
        #expect(new.compartment == old.compartment, sourceLocation: sourceLocation)
        #expect(new.created == old.created, "created \(new.created) vs \(old.created)", sourceLocation: sourceLocation)
        #expect(new.expires == old.expires, "expires \(String(describing: new.expires)) vs \(String(describing: old.expires))", sourceLocation: sourceLocation)
        #expect(new.size == old.size, sourceLocation: sourceLocation)
        #expect(new.sha256 == old.sha256, sourceLocation: sourceLocation)
        if let expected = plaintexts[id] {
            let bytes = try plaintext(of: new, in: restoredVault)
            #expect(bytes.count == expected.count && bytes == expected, "item \(id) (\(old.name)) differs after restore",
                    sourceLocation: sourceLocation)
        }
    }
}

// MARK: errors

extension ArchiveError {
    var caseName: String {
        switch self {
        case .wrongPassword: return "wrongPassword"
        case .keyNotHere: return "keyNotHere"
        case .untrustedSigner: return "untrustedSigner"
        case .signedElsewhere: return "signedElsewhere"
        case .dependencyMissing: return "dependencyMissing"
        case .signerKeyFile: return "signerKeyFile"
        case .trustedSignersDamaged: return "trustedSignersDamaged"
        case .noneTrusted: return "noneTrusted"
        case .keyFileExists: return "keyFileExists"
        case .damaged: return "damaged"
        case .noFreeName: return "noFreeName"
        case .unauthenticatedMessage: return "unauthenticatedMessage"
        case .messageNotText: return "messageNotText"
        case .newestNotVerified: return "newestNotVerified"
        case .othersArchives: return "othersArchives"
        case .noneOfThisHome: return "noneOfThisHome"
        case .noArchiveDirectory: return "noArchiveDirectory"
        case .unsalvageable: return "unsalvageable"
        case .notAnArchive: return "notAnArchive"
        case .fileLockPackage: return "fileLockPackage"
        case .unsupported: return "unsupported"
        case .archiveMissing: return "archiveMissing"
        case .keyFileMissing: return "keyFileMissing"
        case .notAFile: return "notAFile"
        case .outputExists: return "outputExists"
        case .conflicts: return "conflicts"
        case .exportConflicts: return "exportConflicts"
        case .unsafeDestination: return "unsafeDestination"
        case .passwordNeeded: return "passwordNeeded"
        case .noKeyOpens: return "noKeyOpens"
        case .invalidKeyFile: return "invalidKeyFile"
        case .rekeyWouldLock: return "rekeyWouldLock"
        case .wrongPassphrase: return "wrongPassphrase"
        case .remote: return "remote"
        case .messageNotOpened: return "messageNotOpened"
        case .notWrittenHere: return "notWrittenHere"
        case .kdfAboveCeiling: return "kdfAboveCeiling"
        case .kdfWorkAboveCeiling: return "kdfWorkAboveCeiling"
        case .vaultItemDamaged: return "vaultItemDamaged"
        case .selection: return "selection"
        case .selectionInPagesRead: return "selectionInPagesRead"
        case .vault: return "vault"
        case .system: return "system"
        case .caller: return "caller"
        case .container: return "container"
        case .directoryLock: return "directoryLock"
        case .tooLarge: return "tooLarge"
        case .newestUnreadable: return "newestUnreadable"
        case .deleteFailed: return "deleteFailed"
        }
    }
}

/// Runs `body` and checks that it throws an ArchiveError whose case is one of `expected`
/// and whose kind is `kind`. Returns the error so callers can check more.
@discardableResult
func expectArchiveError(_ expected: Set<String>, kind: FailureKind?, _ what: String = "",
                        sourceLocation: SourceLocation = #_sourceLocation,
                        _ body: () throws -> Void) -> ArchiveError? {
    do {
        try body()
        Issue.record("\(what): expected ArchiveError.\(expected.sorted()), but nothing was thrown", sourceLocation: sourceLocation)
        return nil
    } catch let error as ArchiveError {
        #expect(expected.contains(error.caseName), "\(what): expected ArchiveError.\(expected.sorted()), got .\(error.caseName): \(error)",
                sourceLocation: sourceLocation)
        if let kind { #expect(error.kind == kind, "\(what): expected kind \(kind), got \(error.kind): \(error)", sourceLocation: sourceLocation) }
        return error
    } catch {
        Issue.record("\(what): expected ArchiveError.\(expected.sorted()), got \(type(of: error)): \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

@discardableResult
func expectArchiveError(_ expected: String, kind: FailureKind, _ what: String = "",
                        sourceLocation: SourceLocation = #_sourceLocation,
                        _ body: () throws -> Void) -> ArchiveError? {
    expectArchiveError([expected], kind: kind, what, sourceLocation: sourceLocation, body)
}
