import Foundation
import Testing
import N11Crypto
import N11System
@testable import N11Vault

@Suite("Scratch tables: millions of rows in bounded memory, on a file no one else sees")
struct ScratchTableTests {
    @Test("a table far past its page cache keeps every row: values read back, a key already there is refused")
    func spills() throws {
        // 64 KiB of cache against about 2 MiB of rows: most of the table lives in the file.
        let table = try ScratchKeyTable(purpose: "a test table", cacheKiB: 64)
        let count = 100_000
        var generator = SystemRandomNumberGenerator()
        let keys = (0..<count).map { _ in Int64(bitPattern: generator.next()) }
        for (n, key) in keys.enumerated() { #expect(try table.insert(key, value: Int64(n))) }
        for (n, key) in keys.enumerated().reversed() where n % 7 == 0 {
            #expect(try table.value(of: key) == Int64(n))
            #expect(try !table.insert(key, value: -1), "a second insert of a key is refused")
            #expect(try table.value(of: key) == Int64(n), "and changes nothing")
        }
        #expect(try table.value(of: 0) == nil || keys.contains(0))
    }

    @Test("the scratch file is unlinked as it is made: nothing of it is in TMPDIR or the current directory while it spills")
    func leavesNoName() throws {
        let table = try ScratchKeyTable(purpose: "a test table", cacheKiB: 64)
        for key in 0..<50_000 { try table.insert(Int64(key) &* 0x1E37_79B9_7F4A_7C15) }
        let directories = [ProcessInfo.processInfo.environment["TMPDIR"], "/var/tmp", "/tmp", FileManager.default.currentDirectoryPath].compactMap { $0 }
        for directory in directories {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            #expect(!names.contains { $0.hasPrefix("etilqs_") }, "SQLite's temp file is visible in \(directory)")
        }
        // Still in use, through its descriptor.
        #expect(try table.value(of: 49_999 &* 0x1E37_79B9_7F4A_7C15) == 0)
    }

    @Test("ScratchDigest: one key gives one digest a list of fields; another key, or the same bytes split otherwise, another")
    func digests() throws {
        let a = try ScratchDigest(), b = try ScratchDigest()
        #expect(a.digest(["Photos", "x.jpg"]) == a.digest(["Photos", "x.jpg"]))
        #expect(a.digest(["Photos", "x.jpg"]) != b.digest(["Photos", "x.jpg"]))
        #expect(a.digest(["Photos", "x.jpg"]) != a.digest(["Photo", "sx.jpg"]))
        #expect(a.digest(["ab", ""]) != a.digest(["a", "b"]))
    }
}
