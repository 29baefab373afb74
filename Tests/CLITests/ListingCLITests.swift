import Foundation
import Testing
import N11System
import N11TestSupport

/// `vault list` and `list` sort their rows on disk (sealed, unnamed spools) once there are
/// more than a run of them (issue 34). N11_SORT_RUN_ROWS=2 takes that path with a few items:
/// what it prints must be exactly what the in-memory sort prints, and nothing may be left
/// in the temporary directory.
@Suite("Listings sorted through spooled runs")
struct ListingCLITests {
    @Test("vault list and list, table and JSON: spooled runs give the very output of one run, and leave nothing in TMPDIR")
    func spooledRunsPrintTheSame() throws {
        try withSandbox { s in
            try s.initialize()
            // Names a plain byte sort gets wrong ("DSC 10" after "DSC 2"), equal times (so the
            // names decide), and one fade item (an EXPIRES column).
            var files: [String] = []
            let names = ["DSC 10.txt", "DSC 2.txt", "dsc 3.txt", "éclair.txt", "eclair.txt", "Zeta.txt", "alpha.txt"]
            for (n, name) in (names + (0..<14).map { "note \($0).txt" }).enumerated() {
                let path = try s.file(name, Array("note \(n)".utf8))
                let time = Date(timeIntervalSince1970: 1_700_000_000 + Double(n % 3) * 3600)
                try FileManager.default.setAttributes([.modificationDate: time], ofItemAtPath: path)
                files.append(path)
            }
            expectExit(try s.run(["vault", "add", "--note"] + files), 0)
            expectExit(try s.run(["vault", "add", "--note", "--fade", "2d", try s.file("fading.txt", Array("soon".utf8))]), 0)
            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)

            let expectedOrder = ["alpha.txt", "DSC 10.txt", "éclair.txt", "note 2.txt", "note 5.txt", "note 8.txt", "note 11.txt",
                                 "DSC 2.txt", "eclair.txt", "note 0.txt", "note 3.txt", "note 6.txt", "note 9.txt", "note 12.txt",
                                 "dsc 3.txt", "note 1.txt", "note 4.txt", "note 7.txt", "note 10.txt", "note 13.txt", "Zeta.txt",
                                 "fading.txt"]
            let spool = s.path("spool")
            try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: false)
            let commands = [["vault", "list"], ["vault", "list", "--json"], ["list", archive, "--password-file", pw],
                            ["list", archive, "--password-file", pw, "--json"]]
            for command in commands {
                let inMemory = try s.run(command, environment: ["TMPDIR": spool])
                let spooled = try s.run(command, environment: ["TMPDIR": spool, "N11_SORT_RUN_ROWS": "2"])
                expectExit(inMemory, 0)
                expectExit(spooled, 0)
                if command.contains("--json") {
                    let a = try jsonDocument(inMemory), b = try jsonDocument(spooled)
                    let items = { (d: [String: Any]) in try JSONSerialization.data(withJSONObject: d["items"] ?? [], options: .sortedKeys) }
                    #expect(try items(a) == items(b), "\(command)")
                    #expect((a["items"] as? [Any])?.count == expectedOrder.count, "\(command)")
                } else {
                    #expect(inMemory.out == spooled.out, "\(command)")
                    // Oldest first, then names as a file manager sorts them ("note 8" before
                    // "note 11"; case and width aside), the fade item (added now) last.
                    let lines = inMemory.out.split(separator: "\n").map(String.init)
                    let nameColumn = try #require(lines.first?.range(of: "NAME")?.lowerBound.utf16Offset(in: lines[0]))
                    let shown = lines.dropFirst().map { String($0.utf16.dropFirst(nameColumn)) ?? "" }
                    #expect(shown == expectedOrder, "\(command): \(inMemory.out)")
                }
                #expect(try FileManager.default.contentsOfDirectory(atPath: spool).isEmpty, "\(command) left files in TMPDIR")
            }
        }
    }

    @Test("under a low descriptor limit (96) the spooled sort merges fewer spools at a time: 300 rows in runs of 2 still list in full")
    func lowDescriptorLimit() throws {
        // 150 runs: merged only at the end at the usual fan-in, they would need 150
        // descriptors at once; the fan-in follows RLIMIT_NOFILE instead.
        try withSandbox { s in
            try s.initialize()
            let files = try (0..<300).map { try s.file("n\($0).txt", Array("note \($0)".utf8)) }
            let list = s.path("list")
            try Data(files.joined(separator: "\n").utf8 + [10]).write(to: URL(fileURLWithPath: list))
            expectExit(try s.run(["vault", "add", "--note", "--files-from", list]), 0)
            let spool = s.path("spool")
            try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: false)
            let whole = try s.run(["vault", "list"], environment: ["TMPDIR": spool])
            let limited = try s.run(["vault", "list"], environment: ["TMPDIR": spool, "N11_SORT_RUN_ROWS": "2"], openFilesLimit: 96)
            expectExit(whole, 0)
            expectExit(limited, 0)
            #expect(limited.out == whole.out)
            #expect(whole.out.split(separator: "\n").count == 301)
            #expect(try FileManager.default.contentsOfDirectory(atPath: spool).isEmpty)
        }
    }
}
