import Foundation
import Glibc
import Testing
import N11TestSupport

// FileLock packages (`seal`, `unseal`) against an independent Python implementation
// (Scripts/filelock-package.py, written from the description with `cryptography`).

/// Runs Scripts/filelock-package.py; returns its exit status.
func filelockScript(_ arguments: [String]) throws -> Int32 { try pythonScript("filelock-package.py", arguments) }

/// Runs a Python script of Scripts/ quietly; returns its exit status.
func pythonScript(_ name: String, _ arguments: [String]) throws -> Int32 {
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Scripts/" + name).standardized.path
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", script] + arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}

@Suite("n11archive CLI: FileLock packages")
struct SealCLITests {
    static let pythonAvailable: Bool = (try? filelockScript(["--probe"])) == 1

    /// A key store with an identity, its public key (FileLock form) and its private key file.
    static func identity(_ s: Sandbox) throws -> (pub: String, key: String, passphrase: String) {
        try s.initialize()
        expectExit(try s.run(["key", "generate"]), 0)
        let pub = s.path("public_key.pem"), key = s.path("private.key")
        expectExit(try s.run(["key", "export-public", "-o", pub]), 0)
        let pp = try s.passphraseFile()
        expectExit(try s.run(["key", "export-private", "-o", key, "--passphrase-file", pp]), 0)
        return (pub, key, pp)
    }

    @Test("packages round-trip through both implementations, across the 1 MiB streaming pieces",
          .enabled(if: pythonAvailable, "needs python3 with cryptography"))
    func interoperates() throws {
        try withSandbox { s in
            let (pub, key, pp) = try Self.identity(s)
            for size in [0, 1, (1 << 20) - 1, (1 << 20) + 17, 3 * (1 << 20)] {
                let content = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ size) }
                let input = try s.file("in-\(size)", content)
                // Python seals for our public key; we open it.
                let fromPython = s.path("py-\(size).filelock")
                #expect(try filelockScript(["seal", pub, input, fromPython]) == 0)
                let opened = s.path("opened-\(size)")
                expectExit(try s.run(["unseal", fromPython, "-o", opened]), 0)
                #expect(try readBytes(opened) == content, "size \(size)")
                #expect(fileMode(opened) == 0o600)
                // We seal; Python opens it with the exported private key.
                let ours = s.path("ours-\(size).filelock")
                expectExit(try s.run(["seal", "--to", pub, input, "-o", ours]), 0)
                #expect(try readBytes(ours).count == size + 4 * 4 + 113 + 12 + 16)
                let back = s.path("back-\(size)")
                #expect(try filelockScript(["open", key, pp, ours, back]) == 0)
                #expect(try readBytes(back) == content, "size \(size)")
            }
        }
    }

    @Test("a changed, truncated or extended package, or one for another key, writes nothing")
    func refusals() throws {
        try withSandbox { s in
            let (pub, key, pp) = try Self.identity(s)
            let content = (0..<300_000).map { UInt8(truncatingIfNeeded: $0) }
            let package = s.path("p.filelock")
            expectExit(try s.run(["seal", "--to", pub, try s.file("in", content), "-o", package]), 0)
            let bytes = try readBytes(package)
            let out = s.path("out")
            for (name, variant, code) in [
                ("content", { var b = bytes; b[200_000] ^= 1; return b }(), Int32(65)),
                ("tag", { var b = bytes; b[b.count - 1] ^= 1; return b }(), 65),
                ("wrapped-key", { var b = bytes; b[30] ^= 1; return b }(), 77),
                ("truncated", Array(bytes.dropLast(5)), 65),
                ("extended", bytes + [0], 65),
                ("tiny", Array(bytes.prefix(10)), 65),
            ] {
                let path = try s.file("bad-\(name).filelock", variant)
                let result = try s.run(["unseal", path, "-o", out])
                expectExit(result, code)
                #expect(result.err.contains("bad-\(name).filelock"), "\(name): \(result)")
                #expect(!FileManager.default.fileExists(atPath: out), "\(name): something was written")
                #expect(listing(of: s.root).allSatisfy { !$0.hasPrefix(".n11tmp") }, "\(name): a temp file was left")
            }
            // A damaged package is called one, with no archive's salvage in the hint; a file
            // that is no package (an archive, a photo) is called that.
            let changed = try s.run(["unseal", s.path("bad-tag.filelock"), "-o", out])
            #expect(changed.err.contains("the FileLock package") && changed.err.contains("use another copy of the package")
                    && !changed.err.contains("salvage"), "\(changed)")
            for notAPackage in [try s.file("photo.jpg", Array(repeating: 0xFF, count: 5_000)), s.path("bad-tiny.filelock")] {
                let run = try s.run(["unseal", notAPackage, "-o", out])
                expectExit(run, 65)
                #expect(run.err.contains("is not a FileLock package") && run.err.contains("n11archive restore") && !run.err.contains("salvage"),
                        "\(run)")
            }
            // `-` is no file here: refused (64) before anything is read or written.
            for args in [["seal", "--to", pub, "-", "-o", s.path("x.filelock")], ["seal", "--to", pub, s.path("in"), "-o", "-"],
                         ["unseal", package, "-o", "-"], ["unseal", "-", "-o", out]] {
                let run = try s.run(args, stdin: Array("hello".utf8))
                expectExit(run, 64)
                #expect(run.err.contains("not standard"), "\(run)")
            }
            #expect(!FileManager.default.fileExists(atPath: s.path("-")) && !FileManager.default.fileExists(atPath: s.path("x.filelock")))
            // Another machine without the identity: 77, and with --identity it opens.
            expectExit(try s.run(["unseal", package, "-o", out], environment: s.elsewhere("other")), 77)
            expectExit(try s.run(["unseal", package, "-o", out, "--identity", key, "--passphrase-file", pp],
                                 environment: s.elsewhere("other")), 0)
            #expect(try readBytes(out) == content)
            // An existing output is not replaced without --force.
            let again = try s.run(["unseal", package, "-o", out])
            expectExit(again, 73)
            expectExit(try s.run(["unseal", package, "-o", out, "--force"]), 0)
            expectExit(try s.run(["seal", "--to", s.path("missing.pem"), s.path("in"), "-o", s.path("x")]), 66)
        }
    }
}

@Suite("n11archive CLI: FileLock packages in bounded memory")
struct SealMemoryTests {
    @Test("sealing and unsealing 512 MiB stays within a few MiB of sealing 1 KiB")
    func boundedMemory() throws {
        try withSandbox { s in
            let (pub, _, _) = try SealCLITests.identity(s)
            let small = try s.file("small", [UInt8](repeating: 7, count: 1024))
            let smallRun = try s.run(["seal", "--to", pub, small, "-o", s.path("small.filelock")])
            expectExit(smallRun, 0)
            // Sparse: 512 MiB of zeros that cost no disk to make.
            let big = s.path("big")
            let fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            #expect(fd >= 0 && ftruncate(fd, 512 << 20) == 0)
            close(fd)
            let sealed = try s.run(["seal", "--to", pub, big, "-o", s.path("big.filelock")])
            expectExit(sealed, 0)
            unlink(big)
            let opened = try s.run(["unseal", s.path("big.filelock"), "-o", s.path("big.out")])
            expectExit(opened, 0)
            #expect(fileSize(s.path("big.out")) == 512 << 20)
            let baseline = try #require(smallRun.peakRSSKiB), sealPeak = try #require(sealed.peakRSSKiB)
            let unsealPeak = try #require(opened.peakRSSKiB)
            // Holding the content even once would add 512 MiB.
            #expect(sealPeak - baseline < 16 << 10, "seal: \(baseline) KiB → \(sealPeak) KiB")
            #expect(unsealPeak - baseline < 16 << 10, "unseal: \(baseline) KiB → \(unsealPeak) KiB")
        }
    }
}

@Suite("n11archive CLI: the reference reader and recipient archives")
struct ReferenceRecipientTests {
    static func reference(_ arguments: [String]) throws -> Int32 { try pythonScript("format-reference.py", arguments) }

    @Test("FORMAT.md suffices for version 2: the Python reader opens a recipient archive with the exported, passphrase-protected identity",
          .enabled(if: ArchiveCLITests.referenceReaderAvailable, "needs python3 with cryptography >= 44 (Argon2id)"))
    func recipientArchive() throws {
        try withSandbox { s in
            let originals = try s.fillVault()
            expectExit(try s.run(["key", "generate"]), 0)
            let pub = s.path("backup.pub"), key = s.path("backup.key")
            let pp = try s.passphraseFile()
            expectExit(try s.run(["key", "export-public", "-o", pub]), 0)
            expectExit(try s.run(["key", "export-private", "-o", key, "--passphrase-file", pp]), 0)
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "--recipient", pub, "-o", archive]), 0)
            let export = s.path("reference-export")
            #expect(try Self.reference([archive, "--identity", key, "--passphrase-file", pp, "--export", export]) == 0)
            #expect(listing(of: export).count == originals.count)
            #expect(try Self.reference([archive]) == 1, "nothing given: refused")
            let other = s.path("other.key")
            expectExit(try s.run(["init"], environment: s.elsewhere("o")), 0)
            expectExit(try s.run(["key", "generate"], environment: s.elsewhere("o")), 0)
            expectExit(try s.run(["key", "export-private", "-o", other, "--passphrase-file", pp], environment: s.elsewhere("o")), 0)
            #expect(try Self.reference([archive, "--identity", other, "--passphrase-file", pp]) == 1, "another identity: refused")
        }
    }
}
