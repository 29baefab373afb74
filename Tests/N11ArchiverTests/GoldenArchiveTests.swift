import Foundation
import Glibc
import Testing
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// Format version 1 must stay readable forever: the archives committed under
/// Fixtures/golden (made once by Scripts/make-golden) restore byte-exactly.
@Suite("Golden archives (format v1)")
struct GoldenArchiveTests {
    static let golden = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Fixtures/golden").standardized.path

    /// The originals, by the names the archives store.
    func originals() throws -> [String: [UInt8]] {
        ["note.txt": try readBytes(Self.golden + "/items/note.txt"),
         "photo.jpg": try readBytes(Self.golden + "/items/photo.jpg")]
    }

    func password() throws -> SecureBytes {
        var bytes = try readBytes(Self.golden + "/portable-v1.password")
        if bytes.last == 0x0A { bytes.removeLast() }
        return try SecureBytes(copying: bytes)
    }

    func restoredItems(_ vault: Vault) throws -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        for item in try vault.items() {
            let sink = CollectingSink()
            try vault.read(item, into: sink)
            out[item.name] = sink.bytes
        }
        return out
    }

    @Test func portableV1RestoresByteExactly() throws {
        try withTemporaryDirectory { dir in
            let reader = try ArchiveReader(path: Self.golden + "/portable-v1.nu11vlt")
            #expect(reader.header.mode == .portable)
            #expect(reader.header.kdf?.opsLimit == 1 && reader.header.kdf?.memoryKiB == 8192)
            let home = N11Home(root: dir + "/home")
            let keyStore = try KeyStore.create(in: home, pin: nil)
            let archive = try reader.unlock(password: { try password() }, keyStore: { keyStore })
            #expect(archive.items.count == 2)
            _ = try ArchiveVerifier.verify(archive, keyStore: nil)
            let vault = try Vault.open(at: dir + "/vault", keyStore: keyStore, forWriting: true)
            let report = try ArchiveRestorer.restore(archive, into: vault, .init(overwrite: false, dryRun: false))
            #expect(try report.restored.count == 2)
            #expect(try restoredItems(vault) == originals())

            _ = try ArchiveExporter.export(archive, to: dir + "/export", keyStore: nil, .init(overwrite: false, dryRun: false))
            #expect(try readBytes(dir + "/export/Notes/note.txt") == originals()["note.txt"])
            #expect(try readBytes(dir + "/export/Photos/photo.jpg") == originals()["photo.jpg"])
        }
    }

    /// The key store that made secure-v1.nu11vlt, copied into `dir/home`. Git keeps no file
    /// modes: the copy is given the private ones a key store needs.
    static func goldenKeyStore(in dir: String) throws -> KeyStore {
        let home = N11Home(root: dir + "/home")
        try makeDirectory(home.root)
        chmod(home.root, 0o700)
        try writeBytes(try readBytes(golden + "/secure-v1.keystore.n11keys"), to: home.keyStorePath)
        chmod(home.keyStorePath, 0o600)
        return try KeyStore.load(from: home) { nil }
    }

    @Test func secureV1RestoresByteExactlyWithItsKeyStore() throws {
        try withTemporaryDirectory { dir in
            let keyStore = try Self.goldenKeyStore(in: dir)

            let reader = try ArchiveReader(path: Self.golden + "/secure-v1.nu11vlt")
            #expect(reader.header.mode == .secure && reader.header.kdf == nil)
            let archive = try reader.unlock(password: { nil }, keyStore: { keyStore })
            _ = try ArchiveVerifier.verify(archive, keyStore: keyStore)
            let vault = try Vault.open(at: dir + "/vault", keyStore: keyStore, forWriting: true)
            _ = try ArchiveRestorer.restore(archive, into: vault, .init(overwrite: false, dryRun: false))
            #expect(try restoredItems(vault) == originals())
        }
    }

    @Test func secureV1IsRefusedWithoutItsKey() throws {
        try withTemporaryDirectory { dir in
            let keyStore = try KeyStore.create(in: N11Home(root: dir + "/home"), pin: nil)
            let reader = try ArchiveReader(path: Self.golden + "/secure-v1.nu11vlt")
            #expect {
                _ = try reader.unlock(password: { nil }, keyStore: { keyStore })
            } throws: { error in
                guard case .keyNotHere? = error as? ArchiveError else { return false }
                return (error as? ArchiveError)?.kind == .authentication
            }
        }
    }

    /// Versions 2 and 3 (Scripts/make-golden 2, 3): a password slot and a recipient slot for
    /// the committed test identity. Both ways in restore it byte for byte; nothing else opens it.
    @Test(arguments: [2, 3])
    func portableOpensWithThePasswordOrTheIdentity(version: Int) throws {
        try withTemporaryDirectory { dir in
            let path = Self.golden + "/portable-v\(version).nu11vlt"
            let reader = try ArchiveReader(path: path)
            #expect(reader.header.version == version && reader.header.slots.map(\.typeName) == ["password", "p256"])
            var password = try readBytes(Self.golden + "/portable-v\(version).password")
            password.removeLast()
            let identity = try KeyFiles.identity(inFile: Self.golden + "/portable-v2.identity.pem") { throw NoKeyStore() }
            let byPassword = try reader.unlock(password: { try SecureBytes(copying: password) }, keyStore: { throw NoKeyStore() })
            let byIdentity = try ArchiveReader(path: path).unlock(password: { nil }, keyStore: { throw NoKeyStore() },
                                                                  identities: { [identity] })
            for (name, archive) in [("password", byPassword), ("identity", byIdentity)] {
                let (store, vault) = try makeVault(in: dir, name: name)
                _ = store
                _ = try ArchiveRestorer.restore(archive, into: vault, .init(overwrite: false, dryRun: false))
                #expect(try restoredItems(vault) == originals(), "\(name)")
            }
            expectArchiveError("noKeyOpens", kind: .authentication) {
                _ = try ArchiveReader(path: path).unlock(password: { nil }, keyStore: { throw NoKeyStore() },
                                                         identities: { [try P256PrivateKey.generate()] })
            }
        }
    }
}
