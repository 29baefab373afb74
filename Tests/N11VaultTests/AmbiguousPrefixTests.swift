import Foundation
import Testing
import N11Crypto
import N11Format
import N11System
import N11TestSupport
@testable import N11Vault

// Two random UUIDs share a 4-character prefix only after ~300 adds, so this test writes
// metadata records with chosen IDs through the internal sealing function (the same code
// path `Vault.add` uses) instead of adding hundreds of items.

@Suite("Vault.item(matching:) with ambiguous prefixes")
struct AmbiguousPrefixTests {
    private func writeMetadata(id: String, in vaultPath: String, store: KeyStore) throws -> ItemMetadata {
        let metadata = ItemMetadata(id: id, kind: .note, compartment: .vault, name: "n-\(id.prefix(8))",
                                    created: Date(), expires: nil, size: 0, contentTag: String(repeating: "0", count: 32),
                                    sha256: String(repeating: "0", count: 64))
        try TestCatalogue.setRecord(metadata.sealed(with: store.key(for: .vault)), id: id, in: vaultPath)
        return metadata
    }

    @Test("a prefix shared by two items is ambiguousID; one more character resolves it")
    func ambiguous() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let path = dir + "/vault"
            _ = try Vault.open(at: path, keyStore: store, forWriting: true)
            let a = try writeMetadata(id: "ABCD1111-0000-4000-8000-000000000001", in: path, store: store)
            let b = try writeMetadata(id: "ABCD2222-0000-4000-8000-000000000002", in: path, store: store)
            let vault = try Vault.open(at: path, keyStore: store, forWriting: false)
            #expect(Set(try vault.items().map(\.id)) == [a.id, b.id])

            let error = expectVaultError("ambiguousID") { _ = try vault.item(matching: "ABCD") }
            #expect(error?.kind == .missingInput)
            #expect(error?.description.contains("2") == true)
            expectVaultError("ambiguousID") { _ = try vault.item(matching: "abcd") }
            #expect(try vault.item(matching: "ABCD1").id == a.id)
            #expect(try vault.item(matching: "abcd2").id == b.id)
            #expect(try vault.item(matching: a.id.lowercased()).id == a.id)
            // Three characters are never a prefix, and the message says so (a usage error).
            let short = expectVaultError("prefixTooShort") { _ = try vault.item(matching: "ABC") }
            #expect(short?.kind == .usage)
            #expect(short?.description.contains("too short") == true)
        }
    }
}
