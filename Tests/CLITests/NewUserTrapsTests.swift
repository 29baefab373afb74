import Foundation
import Glibc
import Testing
import N11TestSupport

// What a new user tripped over (issue 15): items by name, `-` for stdin and stdout, no
// binary onto a terminal, listings with a header, the backup compartment that a default
// create leaves out, prompts on /dev/tty whatever stdin is, and `vault add` reporting
// what it added.


@Suite("n11archive CLI: what a new user tripped over")
struct NewUserTrapsTests {

    @Test("vault add - reads a photo from stdin; vault cat takes a unique name, -o DIR/ keeps the name, -o - is stdout")
    func namesAndDashes() throws {
        try withSandbox { s in
            try s.initialize()
            let photo = randomBytes(70_000)
            let added = try s.run(["vault", "add", "-", "--name", "sunset.jpg"], stdin: photo)
            expectExit(added, 0)
            #expect(added.out.hasPrefix("added ") && added.out.contains("photo  vault  sunset.jpg"), "\(added)")
            expectExit(try s.run(["vault", "add", try s.file("sunrise.jpg", [1, 2, 3])]), 0)

            let byName = try s.run(["vault", "cat", "sunset.jpg"])
            expectExit(byName, 0)
            #expect(byName.stdout == photo)
            let byGlob = try s.run(["vault", "cat", "sunse*", "-o", "-"])
            #expect(byGlob.stdout == photo, "\(byGlob)")
            let ambiguous = try s.run(["vault", "cat", "sun*"])
            expectExit(ambiguous, 66)
            #expect(ambiguous.err.contains("'sun*' matches 2 items"), "\(ambiguous)")
            #expect(ambiguous.stdout.isEmpty)

            let dir = s.path("pictures")
            mkdir(dir, 0o700)
            let intoDir = try s.run(["vault", "cat", "sunset.jpg", "-o", dir + "/"])
            expectExit(intoDir, 0)
            #expect(try readBytes(dir + "/sunset.jpg") == photo)
            // An existing directory without the slash is the same; the file is then there: 73.
            expectExit(try s.run(["vault", "cat", "sunset.jpg", "-o", dir]), 73)
            expectExit(try s.run(["vault", "cat", "sunset.jpg", "-o", dir, "--force"]), 0)

            // Two `-` are refused before anything is read.
            expectExit(try s.run(["vault", "add", "-", "-"], stdin: [1]), 64)
        }
    }

    @Test("create -o - streams a whole archive to stdout (summary on stderr); restore FILE ITEM --export - writes one verified item")
    func standardOutput() throws {
        try withSandbox { s in
            let photo = randomBytes(150_000)
            try s.initialize()
            expectExit(try s.run(["vault", "add", "-", "--name", "p.jpg"], stdin: photo), 0)
            expectExit(try s.run(["vault", "add", try s.file("q.jpg", randomBytes(3000))]), 0)
            let password = try s.passwordFile()
            // Version 2, whose items are entries of their own: `damageItem` below edits one.
            let piped = try s.run(["create", "--portable", "-o", "-", "--password-file", password, "--format-version", "2"] + fastKDF)
            expectExit(piped, 0)
            #expect(piped.err.contains("wrote to standard output: portable, 2 item(s)"), "\(piped)")
            let archive = try s.file("piped.nu11vlt", piped.stdout)
            expectExit(try s.run(["verify", archive, "--password-file", password]), 0)
            #expect(listing(of: s.home + "/spool").isEmpty, "the spooled copy stayed")
            expectExit(try s.run(["create", "--portable", "-o", "-", "--json", "--password-file", password]), 64)

            let one = try s.run(["restore", archive, "--name", "p.jpg", "--export", "-", "--password-file", password])
            expectExit(one, 0)
            #expect(one.stdout == photo)
            expectExit(try s.run(["restore", archive, "--name", "*.jpg", "--export", "-", "--password-file", password]), 64)
            // A damaged item: 65, and not one byte of it on stdout.
            let listed = try s.run(["list", archive, "--password-file", password, "--json"])
            let items = try #require((try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [String: Any])?["items"] as? [[String: Any]])
            let id = try #require(items.first { $0["name"] as? String == "p.jpg" }?["id"] as? String)
            let damaged = try s.damageItem(id, in: archive)
            let refused = try s.run(["restore", damaged, id, "--export", "-", "--password-file", password])
            expectExit(refused, 65)
            #expect(refused.stdout.isEmpty)
        }
    }

    @Test("list and vault list filter by --name GLOB under an aligned header")
    func listingsByName() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let vaultList = try s.run(["vault", "list", "--name", "*.jpg"])
            expectExit(vaultList, 0)
            let rows = vaultList.out.split(separator: "\n")
            #expect(rows.first?.hasPrefix("ID ") == true && rows.first?.hasSuffix("NAME") == true, "\(vaultList)")
            #expect(rows.count == 5, "four photos and the header: \(vaultList)")
            #expect(!vaultList.out.contains("plan.txt"))

            let password = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", password] + fastKDF), 0)
            let listed = try s.run(["list", archive, "--password-file", password, "--name", "plan.*"])
            expectExit(listed, 0)
            let lines = listed.out.split(separator: "\n").map(String.init)
            #expect(lines.count == 2, "\(listed)")
            // Columns line up: NAME starts at the same place in the header and the row.
            let nameColumn = try #require(lines[0].range(of: "NAME")).lowerBound.utf16Offset(in: lines[0])
            let planColumn = try #require(lines[1].range(of: "plan.txt")).lowerBound.utf16Offset(in: lines[1])
            #expect(nameColumn == planColumn, "\(listed)")
        }
    }

    @Test("create says on every run (even --quiet) how many backup-compartment items it left out; --all-compartments takes them")
    func backupCompartmentNote() throws {
        try withSandbox { s in
            try s.initialize()
            expectExit(try s.run(["vault", "add", try s.file("a.jpg", [1, 2])]), 0)
            expectExit(try s.run(["vault", "add", "--compartment", "backup", try s.file("b.jpg", [3]), try s.file("c.jpg", [4])]), 0)
            let password = try s.passwordFile()
            let plain = try s.run(["create", "--portable", "-o", s.path("d.nu11vlt"), "--password-file", password, "--quiet"] + fastKDF)
            expectExit(plain, 0)
            #expect(plain.err.contains("warning: 2 item(s) in the backup compartment are not in this archive; add --all-compartments to include them"), "\(plain)")

            let json = try s.run(["create", "--portable", "-o", s.path("j.nu11vlt"), "--password-file", password, "--json"] + fastKDF)
            let document = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [String: Any])
            #expect((document["leftOutCompartments"] as? [String: Int]) == ["backup": 2], "\(json)")

            let all = s.path("all.nu11vlt")
            let everything = try s.run(["create", "--portable", "--all-compartments", "-o", all, "--password-file", password] + fastKDF)
            expectExit(everything, 0)
            #expect(!everything.err.contains("not in this archive"), "\(everything)")
            let listed = try s.run(["list", all, "--password-file", password, "--json"])
            let items = try #require((try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [String: Any])?["items"] as? [[String: Any]])
            #expect(items.compactMap { $0["compartment"] as? String }.sorted() == ["backup", "backup", "vault"])

            expectExit(try s.run(["create", "--portable", "--all-compartments", "--compartment", "vault", "-o", s.path("x.nu11vlt"),
                                  "--password-file", password]), 64)
        }
    }

    @Test("vault add prints an added line per item once all are in, and shows progress with --progress")
    func addReportsWhatItAdded() throws {
        try withSandbox { s in
            try s.initialize()
            let files = try (0..<3).map { try s.file("p\($0).jpg", randomBytes(300_000)) }
            let added = try s.run(["vault", "add", "--progress"] + files)
            expectExit(added, 0)
            #expect(added.out.split(separator: "\n").filter { $0.hasPrefix("added ") }.count == 3, "\(added)")
            #expect(added.err.contains("n11archive: add ") && added.err.contains("3/3 items"), "\(added)")
        }
    }

    @Test("on a 50-column terminal every progress line fits (nothing wraps) and Argon2id shows as a phase of its own",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "needs util-linux script"))
    func progressFitsTheTerminal() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let password = try s.passwordFile()
            let (transcript, status) = try runShellOnTerminal(
                "stty cols 50 rows 20; $N11 create --portable -o '\(s.path("a.nu11vlt"))' --password-file '\(password)' --kdf-ops 1 --kdf-memory 8",
                typing: [], home: s.home)
            #expect(status == 0, "\(transcript)")
            #expect(transcript.contains("deriving the key (Argon2id, 8 MiB, 1 pass)"), "\(transcript)")
            #expect(transcript.contains("create 5/5 items"), "no progress was drawn: \(transcript)")
            let drawn = transcript.replacingOccurrences(of: "\u{1B}[K", with: "")
                .components(separatedBy: CharacterSet(charactersIn: "\r\n"))
            // Messages and the summary are ordinary lines; what is redrawn in place must fit.
            for line in drawn where !line.hasPrefix("n11archive: ") && !line.hasPrefix("created ") {
                #expect(line.count <= 49, "a progress line wider than the terminal: '\(line)'")
            }
        }
    }

    @Test("prompts read the controlling terminal even when stdin is a pipe; a photo is not written to a terminal unless --force",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "needs util-linux script"))
    func terminalTraps() throws {
        try withSandbox { s in
            let pinFile = try s.file("pin", Array("86420975\n".utf8))
            chmod(pinFile, 0o600)
            expectExit(try s.run(["init", "--pin", "--pin-file", pinFile]), 0)
            // stdin is the note; the PIN comes from /dev/tty.
            let (typed, status) = try runShellOnTerminal("echo 'door code 4711' | $N11 vault add --note --name door",
                                                         typing: ["86420975"], home: s.home)
            #expect(status == 0, "\(typed)")
            #expect(typed.contains("Enter PIN:") && typed.contains("added "), "\(typed)")
            let pin = ["--pin-file", s.path("pin")]
            #expect(try s.run(["vault", "cat", "door"] + pin).out == "door code 4711\n")

            expectExit(try s.run(["vault", "add", try s.file("raw.jpg", [0x1B, 0x5B, 0x32, 0x4A, 0x00, 0xFF])] + pin), 0)
            let (refused, _) = try runShellOnTerminal("$N11 vault cat raw.jpg --pin-file '\(s.path("pin"))'; echo exit=\\$?",
                                                      typing: [], home: s.home)
            #expect(refused.contains("standard output is a terminal") && refused.contains("exit=64"), "\(refused)")
            // An archive is binary too: not onto the terminal without --force.
            let (archiveRefused, _) = try runShellOnTerminal("$N11 create --secure -o - --pin-file '\(s.path("pin"))'; echo exit=\\$?",
                                                             typing: [], home: s.home)
            #expect(archiveRefused.contains("standard output, which is a terminal") && archiveRefused.contains("exit=64"), "\(archiveRefused)")
            let (forced, _) = try runShellOnTerminal("$N11 vault cat raw.jpg --force --pin-file '\(s.path("pin"))'; echo exit=\\$?",
                                                     typing: [], home: s.home)
            #expect(forced.contains("exit=0"), "\(forced)")
        }
    }
}
