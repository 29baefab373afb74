import Foundation
import Glibc
import Testing
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// Secure archives hold vault item files as they were sealed: after `vault rotate-keys` they
/// need the retired keys, found by the IDs their manifest names (or, for archives from before
/// key IDs, the compartments' first keys), and restore into the vault under the current keys.
@Suite("Secure archives across key rotations")
struct KeyRotationArchiveTests {
    /// The error's kind if `body` throws, nil if it does not.
    func failureKind(_ body: () throws -> Void) -> FailureKind? {
        do { try body(); return nil } catch let error as CategorizedError { return error.kind } catch { return .other }
    }

    @Test("made before a rotation: verifies and restores after it, sealed anew under the current keys; once the keys are forgotten, refused as such")
    func madeBeforeRotation() throws {
        try withTemporaryDirectory { dir in
            let (store, vault) = try makeVault(in: dir, name: "home")
            let bytes = randomBytes(70_001)
            let photoItem = try vault.add(photo(bytes, name: "p.jpg"))
            let noteItem = try vault.add(note(Array("kept".utf8), name: "n.txt", compartment: .backup))
            let archivePath = dir + "/before.nu11vlt"
            try createArchive(from: vault, mode: .secure, to: archivePath, compartments: [.vault, .backup])
            let firstIDs = try Dictionary(uniqueKeysWithValues: [Compartment.vault, .backup].map { ($0, try store.currentKeyID(for: $0)) })
            #expect(try unlock(archivePath, keyStore: store).items.vaultKeys == firstIDs, "the manifest names the keys")

            _ = try vault.rotateKeys(of: Set(Compartment.allCases))
            try vault.remove([photoItem, noteItem])
            let archive = try unlock(archivePath, keyStore: store)
            let verified = try ArchiveVerifier.verify(archive, keyStore: store)
            #expect(verified.items == 2)
            let report = try ArchiveRestorer.restore(archive, into: vault)
            #expect(try Set(report.restored) == [photoItem.id, noteItem.id])
            let fresh = try Vault.open(at: vault.path, keyStore: try KeyStore.load(from: N11Home(root: dir + "/home")) { nil },
                                       forWriting: false)
            for item in try fresh.items() {
                #expect(item.keyID == (try store.currentKeyID(for: item.compartment)), "restored under the current key")
                #expect(try plaintext(of: item, in: fresh) == (item.id == photoItem.id ? bytes : Array("kept".utf8)))
            }
            // A secure archive made now names the new keys and needs no retired one.
            let after = dir + "/after.nu11vlt"
            try createArchive(from: vault, mode: .secure, to: after, compartments: [.vault, .backup])
            #expect(try unlock(after, keyStore: store).items.vaultKeys?[.vault] == (try store.currentKeyID(for: .vault)))

            try store.forgetRetiredKeys(of: Set(Compartment.allCases))
            #expect(failureKind { _ = try ArchiveVerifier.verify(try unlock(archivePath, keyStore: store), keyStore: store) } == .authentication)
            #expect(failureKind { _ = try ArchiveVerifier.verify(try unlock(after, keyStore: store), keyStore: store) } == nil)
        }
    }

    @Test("the golden secure v1 archive (no key IDs) restores with its key store after a rotation, by the first keys")
    func goldenAfterRotation() throws {
        try withTemporaryDirectory { dir in
            let store = try GoldenArchiveTests.goldenKeyStore(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            _ = try vault.rotateKeys(of: Set(Compartment.allCases))

            let archive = try ArchiveReader(path: GoldenArchiveTests.golden + "/secure-v1.nu11vlt").unlock(password: { nil }, keyStore: { store })
            #expect(archive.items.vaultKeys == nil)
            _ = try ArchiveVerifier.verify(archive, keyStore: store)
            _ = try ArchiveRestorer.restore(archive, into: vault)
            #expect(try GoldenArchiveTests().restoredItems(vault) == (try GoldenArchiveTests().originals()))

            // A second rotation: the first keys are still the ones it needs.
            _ = try vault.rotateKeys(of: [.vault])
            _ = try ArchiveVerifier.verify(archive, keyStore: store)
            try store.forgetRetiredKeys(of: [.vault])
            #expect(failureKind { _ = try ArchiveVerifier.verify(archive, keyStore: store) } == .authentication)
        }
    }
}
