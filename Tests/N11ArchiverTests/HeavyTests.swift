import Foundation
import Glibc
import Testing
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// Tests that use a lot of memory on purpose (the default Argon2id costs 256 MiB) or
/// measure it. Serialized, so the measurement never overlaps the 256 MiB derivation.
@Suite("Heavy: default KDF parameters, bounded memory with a 256 MiB item", .serialized)
struct HeavyTests {

    @Test("the default request writes Argon2id opsLimit 3, memoryKiB 262144, parallelism 1; secure headers have no kdf")
    func defaultHeader() throws {
        try withTemporaryDirectory { dir in
            let (_, vault) = try makeVault(in: dir, name: "home")
            _ = try vault.add(note(Array("x".utf8), name: "x.txt"))
            let output = dir + "/default.nu11vlt"
            let request = ArchiveCreator.Request(mode: .portable, compartments: [.vault, .fade], output: output, replaceExisting: false)
            #expect(request.kdf == .moderate)
            _ = try ArchiveCreator.create(from: vault, request) { try secret(testPassword) }
            let header = try ArchiveReader(path: output).header
            #expect(header.kdf == nil, "version 2 keeps the parameters in the password slot")
            let kdf = try #require(header.passwordKDFs.first)
            #expect(kdf.algorithm == "argon2id" && kdf.version == 19)
            #expect(kdf.opsLimit == 3)
            #expect(kdf.memoryKiB == 262144)
            #expect(kdf.parallelism == 1)
            #expect(kdf.saltBytes.count == 16)
            let text = String(decoding: header.bytes, as: UTF8.self)
            #expect(text.contains("\"opsLimit\":3") && text.contains("\"memoryKiB\":262144"), "\(text)")
            #expect(text.contains("\"chunkSize\":65536") && text.contains("\"format\":\"n11archive\"") && text.hasSuffix("\"version\":2}"))

            let secure = dir + "/secure.nu11vlt"
            try createArchive(from: vault, mode: .secure, to: secure)
            let secureHeader = try ArchiveReader(path: secure).header
            #expect(secureHeader.kdf == nil && secureHeader.passwordKDFs.isEmpty)
            #expect(!String(decoding: secureHeader.bytes, as: UTF8.self).contains("kdf"))
        }
    }

    static let itemSize: Int64 = 256 << 20
    /// Argon2id (8 MiB here) plus buffers: a few MiB each. Holding the item even once would
    /// add 256 MiB. The bound leaves room for tests of other suites running meanwhile.
    static let allowedGrowth: Int64 = 96 << 20

    @Test("create, verify and restore of one 256 MiB item stay within bounded memory", arguments: [ArchiveMode.portable, .secure])
    func boundedMemory(mode: ArchiveMode) throws {
        guard resetPeakResidentMemory(), residentMemory() != nil else {
            // Without /proc/self/clear_refs the high-water mark cannot be measured for this
            // test alone; ru_maxrss would include every earlier test's peak.
            Issue.record("cannot reset the RSS high-water mark here; memory not measured")
            return
        }
        // Calibration: the measurement does see memory that is allocated and touched.
        do {
            _ = resetPeakResidentMemory()
            let base = try #require(residentMemory()).current
            var block = [UInt8](repeating: 1, count: 64 << 20)
            block[block.count - 1] = 2
            #expect(block.last == 2)
            let seen = try #require(residentMemory()).peak - base
            #expect(seen >= 60 << 20, "a 64 MiB allocation showed as \(seen >> 20) MiB: the measurement is not working")
        }
        try withTemporaryDirectory { dir in
            let (store, vault) = try makeVault(in: dir, name: "home")
            let source = PatternSource(length: Self.itemSize, seed: 0x5EED + (mode == .portable ? 1 : 2))
            let item = try vault.add(Vault.NewItem(source: source, kind: .photo, name: "huge.raw", compartment: .vault, expires: nil))
            #expect(item.size == Self.itemSize)

            _ = resetPeakResidentMemory()
            let baseline = try #require(residentMemory()).current
            var peaks: [String: Int64] = [:]
            func mark(_ step: String) {
                peaks[step] = (residentMemory()?.peak ?? 0) - baseline
                _ = resetPeakResidentMemory()
            }

            let archivePath = dir + "/huge.nu11vlt"
            let report = try createArchive(from: vault, mode: mode, to: archivePath)
            #expect(report.plaintextBytes == Self.itemSize)
            mark("create")

            let archive = try unlock(archivePath, keyStore: mode == .secure ? store : nil)
            let verified = try ArchiveVerifier.verify(archive, keyStore: mode == .secure ? store : nil)
            #expect(verified.plaintextBytes == Self.itemSize)
            mark("verify")

            let destStore = mode == .secure ? store : try KeyStore.create(in: N11Home(root: dir + "/dest"), pin: nil)
            let destPath = dir + "/restored"
            do {
                let destination = try Vault.open(at: destPath, keyStore: destStore, forWriting: true)
                let restored = try ArchiveRestorer.restore(archive, into: destination, .init(overwrite: false, dryRun: false))
                #expect(restored.restored == [item.id])
            }
            mark("restore")

            for (step, growth) in peaks.sorted(by: { $0.key < $1.key }) {
                #expect(growth < Self.allowedGrowth,
                        "\(mode) \(step): peak RSS grew by \(growth >> 20) MiB (bound \(Self.allowedGrowth >> 20) MiB)")
            }
            print("memory (\(mode)): " + peaks.sorted { $0.key < $1.key }.map { "\($0.key) +\($0.value >> 20) MiB" }.joined(separator: ", "))

            // The restored item is the original, checked by streaming digest.
            let restoredItem = try #require(try storedItems(of: destPath, keyStore: destStore)[item.id])
            let sink = HashingSink()
            try Vault.open(at: destPath, keyStore: destStore, forWriting: false).read(restoredItem, into: sink)
            #expect(sink.length == Self.itemSize)
            #expect(try sink.finish() == item.sha256)
        }
    }
}
