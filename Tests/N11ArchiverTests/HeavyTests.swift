import Foundation
import Glibc
import Testing
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

/// The default Argon2id parameters (256 MiB). Bounded memory with a large item is measured
/// in the child process that does the work (CLITests/ArchiveMemoryTests): this process's
/// high-water mark would also count every suite running meanwhile.
@Suite("Heavy: default KDF parameters")
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
            #expect(text.contains("\"chunkSize\":65536") && text.contains("\"format\":\"n11archive\"") && text.hasSuffix("\"version\":\(ArchiveHeader.currentVersion)}"))

            let secure = dir + "/secure.nu11vlt"
            try createArchive(from: vault, mode: .secure, to: secure)
            let secureHeader = try ArchiveReader(path: secure).header
            #expect(secureHeader.kdf == nil && secureHeader.passwordKDFs.isEmpty)
            #expect(!String(decoding: secureHeader.bytes, as: UTF8.self).contains("kdf"))
        }
    }
}
