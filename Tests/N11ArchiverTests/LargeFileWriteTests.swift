import Foundation
import Glibc
import Testing
import N11Archiver
import N11System
import N11TestSupport
import N11Vault

/// Files of 1 MiB and more are written around the page cache, their last writes on a thread
/// of their own (`DirectFileWriter`): every one must be whole when the change commits.
@Suite("Photos of 1 MiB and more: restored and exported around the page cache, byte for byte")
struct LargeFileWriteTests {
    @Test("each photo restored into a fresh home and exported reads back whole, with its time")
    func largePhotosComeBackWhole() throws {
        try withTemporaryDirectory { dir in
            let (_, source) = try makeVault(in: dir, name: "source")
            // Around a buffer (1 MiB) and a block (4096): the last writes differ for each.
            let sizes = [1 << 20, (1 << 20) + 1, 2 << 20, (3 << 20) + 4097]
            var contents: [String: [UInt8]] = [:]
            for (n, size) in sizes.enumerated() {
                let bytes = randomBytes(size)
                let item = try source.add(Vault.NewItem(source: MemorySource(bytes), kind: .photo, name: "p\(n).jpg",
                                                        compartment: .vault, expires: nil, sizeHint: Int64(size)))
                contents[item.id] = bytes
            }
            let added = try storedItems(of: source.path, keyStore: source.keyStore)
            let check = try Vault.open(at: source.path, keyStore: source.keyStore, forWriting: false)
            for (id, item) in added { #expect(try plaintext(of: item, in: check) == contents[id], "added \(item.name)") }

            let archivePath = dir + "/a.nu11vlt"
            try createArchive(from: source, mode: .portable, to: archivePath)

            let home = N11Home(root: dir + "/dest")
            let destStore = try KeyStore.create(in: home, pin: nil)
            let destination = try Vault.open(at: home.defaultVaultPath, keyStore: destStore, forWriting: true)
            let report = try ArchiveRestorer.restore(try unlock(archivePath, keyStore: nil), into: destination, .init())
            #expect(try Set(report.restored) == Set(contents.keys))
            let restored = try storedItems(of: home.defaultVaultPath, keyStore: destStore)
            let reopened = try Vault.open(at: home.defaultVaultPath, keyStore: destStore, forWriting: false)
            for (id, item) in restored { #expect(try plaintext(of: item, in: reopened) == contents[id], "restored \(item.name)") }

            _ = try ArchiveExporter.export(try unlock(archivePath, keyStore: nil), to: dir + "/export", keyStore: nil)
            for (id, item) in added {
                let path = dir + "/export/Photos/" + item.name
                #expect(try readBytes(path) == contents[id], "exported \(item.name)")
                let modified = try #require(FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date)
                #expect(Int64(modified.timeIntervalSince1970) == Int64(item.created.timeIntervalSince1970.rounded(.down)), "time of \(item.name)")
            }
        }
    }
}
