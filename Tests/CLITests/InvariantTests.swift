import Foundation
import Glibc
import Testing
import N11TestSupport

/// DESIGN.md §3.1 and §3.7, tested with markers: plaintext never touches disk (outside an
/// explicit export), and no secret or plaintext appears in a message or `--json` output.
@Suite("Invariants: no plaintext on disk, no secret in output")
struct InvariantTests {
    static let contentMarker = "N11-PLAINTEXT-MARKER-5f0c9e2a"
    static let noteMarker = "N11-NOTE-MARKER-a17d33b0"
    static let passwordMarker = "N11-PASSWORD-MARKER-c4e8"
    static let pinMarker = "8642975310"

    /// Every regular file below `root` (except `excluded` prefixes) that contains any marker.
    func filesContaining(_ markers: [String], under root: String, excluding excluded: [String]) -> [String] {
        var hits: [String] = []
        guard let walker = FileManager.default.enumerator(atPath: root) else { return hits }
        while let relative = walker.nextObject() as? String {
            let path = root + "/" + relative
            if excluded.contains(where: { path.hasPrefix($0) }) { continue }
            guard let bytes = try? readBytes(path) else { continue }
            let haystack = Data(bytes)
            for marker in markers where haystack.range(of: Data(marker.utf8)) != nil { hits.append("\(relative): \(marker)") }
        }
        return hits
    }

    @Test("create (both modes), verify, list and restore write no plaintext anywhere, temp directories included")
    func noPlaintextOnDisk() throws {
        try withSandbox { s in
            let tmp = s.path("tmp")
            try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
            let env = ["TMPDIR": tmp]
            let inputs = s.path("inputs")
            try FileManager.default.createDirectory(atPath: inputs, withIntermediateDirectories: true)
            let photoBytes = Array((String(repeating: "x", count: 70_000) + Self.contentMarker + String(repeating: "y", count: 100)).utf8)
            let photo = inputs + "/holiday.jpg"
            try writeBytes(photoBytes, to: photo)
            let note = inputs + "/note.txt"
            try writeBytes(Array("remember \(Self.noteMarker)\n".utf8), to: note)
            let pw = inputs + "/pw"
            try writeBytes(Array("\(Self.passwordMarker)\n".utf8), to: pw)

            expectExit(try s.run(["init"], environment: env), 0)
            expectExit(try s.run(["vault", "add", photo], environment: env), 0)
            expectExit(try s.run(["vault", "add", "--note", note], environment: env), 0)
            expectExit(try s.run(["vault", "add", "--note", "--name", "stdin-note"], stdin: Array("from stdin \(Self.noteMarker)".utf8), environment: env), 0)
            let portable = s.path("p.nu11vlt"), secure = s.path("s.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", portable, "--password-file", pw] + fastKDF, environment: env), 0)
            expectExit(try s.run(["create", "--secure", "-o", secure], environment: env), 0)
            for archive in [portable, secure] {
                expectExit(try s.run(["verify", archive, "--password-file", pw], environment: env), 0)
                expectExit(try s.run(["list", archive, "--json", "--password-file", pw], environment: env), 0)
                expectExit(try s.run(["info", archive], environment: env), 0)
            }
            expectExit(try s.run(["restore", portable, "--password-file", pw], environment: ["TMPDIR": tmp, "N11_HOME": s.path("other")]), 0)
            expectExit(try s.run(["restore", secure, "--vault", s.path("vault2")], environment: env), 0)
            expectExit(try s.run(["restore", portable, "--password-file", pw, "--dry-run"], environment: env), 0)
            expectExit(try s.run(["vault", "verify"], environment: env), 0)

            // Everything the tool wrote: homes, vaults, archives, temp dirs. Not the inputs.
            let hits = filesContaining([Self.contentMarker, Self.noteMarker, Self.passwordMarker], under: s.root,
                                       excluding: [inputs])
            #expect(hits.isEmpty, "plaintext or password on disk: \(hits)")
            // The scan can find things: the explicit export is allowed to, and does.
            expectExit(try s.run(["restore", portable, "--password-file", pw, "--export", s.path("export")], environment: env), 0)
            #expect(!filesContaining([Self.contentMarker], under: s.path("export"), excluding: []).isEmpty)
        }
    }

    @Test("no password, PIN or plaintext in any message or --json output, including errors")
    func noSecretsInOutput() throws {
        try withSandbox { s in
            let pinFile = try s.file("pin", Array("\(Self.pinMarker)\n".utf8))
            let pw = try s.file("pw", Array("\(Self.passwordMarker)\n".utf8))
            let wrong = try s.file("wrong", Array("\(Self.passwordMarker)-WRONG\n".utf8))
            let badPin = try s.file("badpin", Array("\(Self.pinMarker)9\n".utf8))
            let photo = try s.file("p.jpg", Array(Self.contentMarker.utf8))
            let pin = ["--pin-file", pinFile]
            var outputs: [RunResult] = []
            func run(_ args: [String], stdin: [UInt8]? = nil) throws { outputs.append(try s.run(args, stdin: stdin)) }

            try run(["init", "--pin"] + pin)
            try run(["vault", "add", photo] + pin)
            try run(["vault", "add", "--note", "--name", "n"] + pin, stdin: Array(Self.noteMarker.utf8))
            try run(["vault", "list", "--json"] + pin)
            try run(["vault", "list"] + pin)
            try run(["vault", "list", "--pin-file", badPin])           // wrong PIN
            let archive = s.path("a.nu11vlt")
            try run(["create", "--portable", "-o", archive, "--password-file", pw] + pin + fastKDF)
            try run(["create", "--portable", "-o", archive, "--password-file", pw] + pin + fastKDF)   // exists
            try run(["list", archive, "--json", "--password-file", pw])
            try run(["info", archive, "--json"])
            try run(["verify", archive, "--password-file", wrong])    // wrong password
            try run(["restore", archive, "--password-file", wrong] + pin)
            var damaged = try readBytes(archive)
            damaged[damaged.count / 2] ^= 1
            try run(["verify", try s.file("d.nu11vlt", damaged), "--password-file", pw])   // damaged

            #expect(outputs.contains { $0.status == 77 } && outputs.contains { $0.status == 65 } && outputs.contains { $0.status == 73 })
            for result in outputs {
                for marker in [Self.passwordMarker, Self.pinMarker, Self.contentMarker, Self.noteMarker] {
                    #expect(!result.out.contains(marker) && !result.err.contains(marker), "\(marker) in the output of \(result.arguments)")
                }
            }
        }
    }
}
