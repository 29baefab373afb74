import Foundation
import Glibc
import Synchronization
import Testing
import N11Archiver
import N11Container
import N11System
import N11TestSupport

/// The ZIP writer goes through its own buffered output file (`ZipOutputFile`): libzip seeks
/// back to every local header to write its CRC, sometimes into the buffer and sometimes
/// behind it. These tests read the result back with libzip's consistency checks and CRC
/// checks on, and with Python's zipfile, across sizes around the 1 MiB buffer.
@Suite("ZIP container: buffered output")
struct ZipContainerTests {
    /// Entry sizes around libzip's 8 KiB copies and the 1 MiB write-behind buffer.
    static let sizes = [0, 1, 8191, 8193, (1 << 20) - 40, 1 << 20, (1 << 20) + 100, 3 * (1 << 20) + 7, 2, 5000]

    static func bytes(_ index: Int, _ size: Int) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: ($0 &* 131) ^ (index &* 17) ^ ($0 >> 9)) }
    }

    static func write(_ path: String) throws {
        let writer = try ZipWriter(path: path)
        for (i, size) in sizes.enumerated() {
            try writer.addEntry(name: "entry-\(i)", size: Int64(size), modified: 0) { MemorySource(bytes(i, size)) }
        }
        try writer.finish()
    }

    @Test("every entry reads back byte for byte with CRC and consistency checks")
    func readsBack() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/t.zip"
            try Self.write(path)
            var mode = stat()
            #expect(stat(path, &mode) == 0 && mode.st_mode & 0o777 == 0o600)
            let reader = try ZipReader(path: path)
            #expect(reader.entryCount == Self.sizes.count)
            for (i, size) in Self.sizes.enumerated() {
                let entry = try reader.entry(at: i)
                #expect(entry.name == "entry-\(i)" && entry.size == Int64(size))
                var data: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 70_000)
                let source = try reader.open(entry, checkCRC: true)
                while true {
                    let n = try source.read(into: &buffer, offset: 0, count: buffer.count)
                    if n == 0 { break }
                    data += buffer[0..<n]
                }
                #expect(data == Self.bytes(i, size), "entry \(i)")
            }
        }
    }

    /// A restore reads a version 3 archive's manifest pages on one thread while its packs
    /// stream on another, through one reader: libzip's handle and the file position under it
    /// are shared, so every call on them is serialized. Without that, one entry's read lands
    /// where the other's seek left the file, and the bytes (or the CRC) come out wrong.
    @Test("two threads read two entries of one reader at once, each byte for byte")
    func sharedBetweenThreads() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/t.zip"
            try Self.write(path)
            let reader = try ZipReader(path: path)
            // The two largest entries, read in small steps so that the threads' reads interleave.
            let chosen = [7, 6]
            let expected = chosen.map { Self.bytes($0, Self.sizes[$0]) }
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { thread in
                let index = chosen[thread]
                for round in 0..<10 {
                    do {
                        let entry = try reader.entry(at: index)
                        let source = try reader.open(entry, checkCRC: true)
                        var data: [UInt8] = []
                        var buffer = [UInt8](repeating: 0, count: 4096)
                        while true {
                            let n = try source.read(into: &buffer, offset: 0, count: buffer.count)
                            if n == 0 { break }
                            data += buffer[0..<n]
                        }
                        if data != expected[thread] { failures.withLock { $0.append("entry \(index), round \(round): other bytes") } }
                    } catch {
                        failures.withLock { $0.append("entry \(index), round \(round): \(error)") }
                    }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 }.prefix(3))")
        }
    }

    @Test("an independent reader (Python's zipfile) finds every local header and CRC right")
    func pythonAgrees() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            Issue.record("python3 is missing: Scripts/setup installs it")
            return
        }
        try withTemporaryDirectory { dir in
            let path = dir + "/t.zip"
            try Self.write(path)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = ["-c", "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); bad = z.testzip(); "
                                 + "print(len(z.infolist())); sys.exit(1 if bad else 0)", path]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            process.waitUntilExit()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(process.terminationStatus == 0)
            #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == "\(Self.sizes.count)")
        }
    }

    @Test("the writer refuses to replace an existing file and leaves it alone")
    func refusesExisting() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/t.zip"
            try Data("keep me".utf8).write(to: URL(fileURLWithPath: path))
            #expect(throws: ContainerError.self) { _ = try ZipWriter(path: path) }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data("keep me".utf8))
        }
    }
}

/// A portable unlock lets go of the ZIP while Argon2id runs (its memory is the peak) and
/// opens it again after: what it reopens must be the archive it derived the key for.
@Suite("Unlock: reopening the archive after the key derivation")
struct ReopenAfterDerivationTests {
    @Test("an archive replaced while its key is derived is refused as damaged, not read")
    func replacedDuringDerivation() throws {
        try withTemporaryDirectory { dir in
            let (_, vault) = try makeVault(in: dir, name: "v")
            _ = try vault.add(note(Array("first".utf8), name: "a"))
            let path = dir + "/a.nu11vlt", other = dir + "/b.nu11vlt"
            try createArchive(from: vault, mode: .portable, to: path)
            try createArchive(from: vault, mode: .portable, to: other)
            let reader = try ArchiveReader(path: path)
            let error = expectArchiveError("damaged", kind: .damaged, "replaced while deriving") {
                // The password is read after the first opening and before the derivation:
                // swap the file in between, as a concurrent writer could.
                _ = try reader.unlock(password: {
                    #expect(rename(other, path) == 0)
                    return try secret(testPassword)
                }, keyStore: { throw NoKeyStore() })
            }
            // Caught by the reopening itself, not later by chance (B's manifest would not open either).
            #expect(error.map { "\($0)" }?.contains("changed while it was being read") == true, "\(String(describing: error))")
        }
    }

    @Test("an unchanged archive unlocks and every item verifies after the reopening")
    func unchangedReopens() throws {
        try withTemporaryDirectory { dir in
            let (store, vault) = try makeVault(in: dir, name: "v")
            _ = try vault.add(note(Array("first".utf8), name: "a"))
            _ = try vault.add(photo([UInt8](repeating: 7, count: 300_000), name: "b.jpg"))
            let path = dir + "/a.nu11vlt"
            try createArchive(from: vault, mode: .portable, to: path)
            let archive = try unlock(path, keyStore: store)
            #expect(try ArchiveVerifier.verify(archive, keyStore: store).items == 2)
        }
    }
}
