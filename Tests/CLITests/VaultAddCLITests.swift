import Foundation
import Glibc
import Testing
import N11TestSupport

// Adding the same photos again (issue 30): content the vault already holds is skipped and
// named, a file keeps its modification time through an archive and an export, a failed
// add lists nothing as added, a directory is answered with the find line that adds it, and
// the item listings fit an 80-column terminal, oldest first.

/// Sets a file's modification time to `seconds` since 1970.
private func setModified(_ path: String, _ seconds: Int) {
    var times = [timespec(tv_sec: seconds, tv_nsec: 0), timespec(tv_sec: seconds, tv_nsec: 0)]
    #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
}

private func listedItems(_ s: Sandbox) throws -> [[String: Any]] {
    let listed = try s.run(["vault", "list", "--json"])
    expectExit(listed, 0)
    return try #require((try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [String: Any])?["items"] as? [[String: Any]])
}

@Suite("n11archive CLI: vault add")
struct VaultAddCLITests {

    /// A backup reads every file, and each read after a change (on a `relatime` mount, and
    /// once a day) writes the file's inode for its access time: `vault add` did for every file
    /// it took, and a nightly `create` for every vault file. They open with O_NOATIME.
    /// O_NOATIME is only the owner's (or CAP_FOWNER's) to ask for: the kernel refuses it with
    /// EPERM for anyone else's file, and the file is then opened as before. Run as `nobody`
    /// where the tests run as root (who may always ask), so that the refusal really happens.
    @Test("vault add takes a file someone else owns: the refused O_NOATIME is asked without")
    func othersFilesStillRead() throws {
        if geteuid() != 0 {
            try withSandbox { s in
                try s.initialize()
                expectExit(try s.run(["vault", "add", "--note", "/etc/passwd"]), 0)
                #expect(try listedItems(s).map { $0["name"] as? String } == ["passwd"])
            }
            return
        }
        let script = """
            set -e
            h=$(mktemp -d /tmp/n11-others-XXXXXX); trap 'rm -rf "$h"' EXIT
            mkdir "$h/in"; printf 'a note of root' > "$h/in/root-note.txt"; chmod 0644 "$h/in/root-note.txt"
            chown 65534:65534 "$h"
            as() { setpriv --reuid=65534 --regid=65534 --clear-groups env N11_HOME="$h/home" "$@"; }
            as \(n11archiveBinary) init > /dev/null
            as \(n11archiveBinary) vault add --note "$h/in/root-note.txt"
            as \(n11archiveBinary) vault list --json
            """
        let (output, status) = try runShell(script)
        #expect(status == 0, "\(output)")
        #expect(output.contains("\"name\":\"root-note.txt\"") || output.contains("\"name\" : \"root-note.txt\""), "\(output)")
    }

    @Test("vault add, create and vault verify read files without changing their access times")
    func accessTimesLeftAlone() throws {
        try withSandbox { s in
            try s.initialize()
            let old = 1_600_000_000
            func accessed(_ path: String) -> Int {
                var st = stat()
                #expect(stat(path, &st) == 0, "\(path)")
                return st.st_atim.tv_sec
            }
            // An access time before the modification time is one a read updates under relatime.
            func makeStale(_ path: String) {
                var st = stat()
                #expect(stat(path, &st) == 0, "\(path)")
                var times = [timespec(tv_sec: old, tv_nsec: 0), st.st_mtim]
                #expect(utimensat(AT_FDCWD, path, &times, 0) == 0, "\(path)")
            }
            func readThrough(_ path: String) {
                let fd = open(path, O_RDONLY)
                var byte: UInt8 = 0
                #expect(fd >= 0 && read(fd, &byte, 1) == 1, "\(path)")
                close(fd)
            }
            // This file system records access times as the test needs: a plain read does.
            let control = try s.file("control.txt", Array("control".utf8))
            makeStale(control)
            readThrough(control)
            #expect(accessed(control) != old, "a plain read leaves the access time here: the mount records none (noatime)")

            let note = try s.file("n.txt", Array("a note".utf8))
            let photo = try s.file("p.jpg", randomBytes(3 << 20))
            makeStale(note)
            makeStale(photo)
            expectExit(try s.run(["vault", "add", "--note", note]), 0)
            expectExit(try s.run(["vault", "add", photo]), 0)
            #expect(accessed(note) == old && accessed(photo) == old, "vault add changed an access time")

            let contentFiles = try ["Notes", "Photos"].flatMap { folder in
                try FileManager.default.contentsOfDirectory(atPath: s.vault + "/" + folder).map { s.vault + "/" + folder + "/" + $0 }
            }
            #expect(contentFiles.count == 2, "\(contentFiles)")
            contentFiles.forEach(makeStale)
            expectExit(try s.run(["vault", "verify"]), 0)
            expectExit(try s.run(["create", "--portable", "-o", s.path("a.nu11vlt"), "--password-file", try s.passwordFile()] + fastKDF), 0)
            for file in contentFiles { #expect(accessed(file) == old, "\(file): read by vault verify or create") }
        }
    }

    @Test("adding the same content again skips it and names the item that has it; --allow-duplicates adds it; another compartment is no duplicate")
    func duplicatesSkipped() throws {
        try withSandbox { s in
            try s.initialize()
            let a = try s.file("a.jpg", randomBytes(40_000))
            let b = try s.file("b.jpg", randomBytes(40_000))  // same size as a: read to compare, not a duplicate
            expectExit(try s.run(["vault", "add", a]), 0)
            let firstID = try #require(try listedItems(s).first?["id"] as? String)

            let copy = try s.file("copy-of-a.jpg", try readBytes(a))
            let again = try s.run(["vault", "add", a, b, copy])
            expectExit(again, 0)
            let lines = again.out.split(separator: "\n").map(String.init)
            #expect(lines.filter { $0.hasPrefix("added ") }.count == 1 && lines.contains { $0.hasPrefix("added ") && $0.hasSuffix("b.jpg") }, "\(again)")
            #expect(lines.contains("skipped a.jpg: same content as \(firstID.prefix(8))"), "\(again)")
            #expect(lines.contains("skipped copy-of-a.jpg: same content as \(firstID.prefix(8)) 'a.jpg'"), "\(again)")
            #expect(again.err.contains("2 already in the vault, skipped") && again.err.contains("--allow-duplicates"), "\(again)")
            #expect(try listedItems(s).count == 2)

            // Two copies in one add: the second is a duplicate of the first.
            let c = try s.file("c.jpg", randomBytes(1_000))
            let c2 = try s.file("c2.jpg", try readBytes(c))
            let pair = try s.run(["vault", "add", c, c2])
            expectExit(pair, 0)
            #expect(pair.out.contains("skipped c2.jpg: same content as") && pair.out.contains("'c.jpg', added above"), "\(pair)")
            #expect(pair.err.contains("1 with the same content as a file added above, skipped") && !pair.err.contains("already in"),
                    "\(pair)")
            // A file given twice, beside one the vault had: each counted for what it is.
            let d = try s.file("d.jpg", randomBytes(2_000))
            let twice = try s.run(["vault", "add", d, d, a])
            expectExit(twice, 0)
            #expect(twice.out.contains("skipped d.jpg: same content as") && twice.out.contains(", added above"), "\(twice)")
            #expect(twice.out.contains("skipped a.jpg: same content as \(firstID.prefix(8))\n"), "\(twice)")
            #expect(twice.err.contains("1 already in the vault, 1 with the same content as a file added above, skipped"), "\(twice)")

            let allowed = try s.run(["vault", "add", "--allow-duplicates", copy])
            expectExit(allowed, 0)
            #expect(allowed.out.hasPrefix("added ") && !allowed.out.contains("skipped"), "\(allowed)")
            expectExit(try s.run(["vault", "add", "--compartment", "backup", a]), 0)
            #expect(try listedItems(s).count == 6, "a, b, c, d, the allowed copy and the backup-compartment one")

            // An item whose content no longer verifies (bit rot) is no copy: the original is added anew.
            let rotting = try s.file("rot.jpg", randomBytes(5_000))
            expectExit(try s.run(["vault", "add", rotting]), 0)
            let rotID = try #require(try listedItems(s).first { $0["name"] as? String == "rot.jpg" }?["id"] as? String)
            let content = s.home + "/vault/Photos/\(rotID).n11"
            var rotten = try readBytes(content)
            rotten[rotten.count / 2] ^= 0x01
            try writeBytes(rotten, to: content)
            // rot.jpg is added anew; its copy then has two items of its content, the rotten one
            // and the one just added: the one that verifies counts, whichever comes first.
            let rotCopy = try s.file("rot-copy.jpg", try readBytes(rotting))
            let repaired = try s.run(["vault", "add", rotting, rotCopy])
            let repairedLines = repaired.out.split(separator: "\n").map(String.init)
            #expect(repairedLines.count == 2 && repairedLines.contains { $0.hasPrefix("added ") && $0.hasSuffix("rot.jpg") }, "\(repaired)")
            #expect(repairedLines.contains { $0.hasPrefix("skipped rot-copy.jpg: same content as") }
                    && !repaired.out.contains(String(rotID.prefix(8))), "\(repaired)")
            expectExit(try s.run(["vault", "rm", rotID]), 0)

            // Fade items are never duplicates (each has its own expiry), either way.
            expectExit(try s.run(["vault", "add", "--fade", "1h", a]), 0)
            let fadeAgain = try s.run(["vault", "add", "--fade", "7d", a])
            #expect(fadeAgain.out.hasPrefix("added ") && !fadeAgain.out.contains("skipped"), "\(fadeAgain)")

            // Notes from stdin compare too (bytes in memory); a photo from stdin is always added.
            expectExit(try s.run(["vault", "add", "--note", "--name", "n1"], stdin: Array("same text".utf8)), 0)
            let note = try s.run(["vault", "add", "--note", "--name", "n2"], stdin: Array("same text".utf8))
            #expect(note.out.contains("skipped n2: same content as"), "\(note)")
        }
    }

    @Test("an item keeps its file's modification time: vault list, the archive's list and an export's mtime show it")
    func modificationTimeKept() throws {
        try withSandbox { s in
            try s.initialize()
            let old = try s.file("z-old.jpg", randomBytes(2_000))
            let new = try s.file("a-new.jpg", randomBytes(2_000))
            setModified(old, 1_556_712_000)   // 2019-05-01T12:00:00Z
            setModified(new, 1_700_000_000)   // 2023-11-14T22:13:20Z
            expectExit(try s.run(["vault", "add", new, old]), 0)
            let items = try listedItems(s)
            let created = Dictionary(uniqueKeysWithValues: items.map { ($0["name"] as! String, $0["created"] as! String) })
            #expect(created["z-old.jpg"]?.hasPrefix("2019-05-01T12:00:00") == true, "\(created)")
            #expect(created["a-new.jpg"]?.hasPrefix("2023-11-14T22:13:20") == true, "\(created)")
            // The table (not a terminal: full fields) lists the older photo first.
            let table = try s.run(["vault", "list"])
            let rows = table.out.split(separator: "\n").dropFirst()
            #expect(rows.first?.hasSuffix("z-old.jpg") == true && rows.last?.hasSuffix("a-new.jpg") == true, "\(table)")

            let password = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", password] + fastKDF), 0)
            let listed = try s.run(["list", archive, "--password-file", password])
            #expect(listed.out.contains("2019-05-01T12:00:00Z"), "\(listed)")
            let dir = s.path("out")
            let exported = try s.run(["restore", archive, "--export", dir, "--password-file", password])
            expectExit(exported, 0)
            #expect(exported.out.hasPrefix("exported 2 item(s)"), "\(exported)")
            var st = stat()
            #expect(stat(dir + "/Photos/z-old.jpg", &st) == 0)
            #expect(st.st_mtim.tv_sec == 1_556_712_000)
            // vault cat -o gives the file the same time.
            let catted = s.path("cat-out.jpg")
            expectExit(try s.run(["vault", "cat", "z-old.jpg", "-o", catted]), 0)
            #expect(stat(catted, &st) == 0 && st.st_mtim.tv_sec == 1_556_712_000)
        }
    }

    @Test("a failed add lists nothing as added on stdout; a directory is answered with the find line that adds its files")
    func failuresListNothing() throws {
        try withSandbox { s in
            try s.initialize()
            let good = try s.file("good.txt", Array("fine".utf8))
            let bad = try s.file("bad.txt", [0xFF, 0xFE, 0x00, 0x80])  // not UTF-8: found only when it is read
            let failed = try s.run(["vault", "add", "--note", good, bad])
            #expect(failed.status != 0, "\(failed)")
            #expect(!failed.out.contains("added"), "\(failed)")
            #expect(try listedItems(s).isEmpty)

            let directory = s.path("Bob's pictures")
            mkdir(directory, 0o700)
            // Checked before the password is read and anything decrypted, for messages too.
            let messages = try s.run(["vault", "add", "--note", "--from-ciphio", directory, "--password-file", try s.passwordFile()])
            #expect(messages.status != 0 && messages.err.contains("is a directory"), "\(messages)")
            let refused = try s.run(["vault", "add", directory])
            #expect(refused.status != 0)
            // Quoted for a shell, so that the line can be pasted as it is.
            let quoted = "'" + directory.replacingOccurrences(of: "'", with: "'\\''") + "'"
            #expect(refused.err.contains("find \(quoted) -type f -print0 | n11archive vault add --null --files-from -"), "\(refused)")
        }
    }

    @Test("a listed note that fails where it is read ahead (batches past the first) fails the add in its turn, naming it; nothing is added")
    func listedNoteFailsInItsTurn() throws {
        try withSandbox { s in
            try s.initialize()
            var paths: [String] = []
            for n in 0..<200 {
                // Note 20 is too large to be read ahead (16 KiB): it is read in its turn.
                let text = n == 20 ? Array(repeating: UInt8(ascii: "x"), count: 100_000) : Array("note \(n)".utf8)
                paths.append(try s.file("n\(n).txt", n == 150 ? [0xFF, 0xFE, 0x00, 0x80] : text))
            }
            let list = try s.file("list", Array(paths.joined(separator: "\n").utf8) + [0x0A])
            // The first pass checks only that each path is a small regular file; the bytes are read later.
            let failed = try s.run(["vault", "add", "--note", "--files-from", list])
            expectExit(failed, 1)
            #expect(failed.err.contains("'\(paths[150])' is not UTF-8 text") && failed.err.contains("nothing was added; a note holds UTF-8 text only"), "\(failed)")
            #expect(!failed.out.contains("added"), "\(failed)")
            #expect(try listedItems(s).isEmpty)

            try writeBytes(Array("now text".utf8), to: paths[150])
            expectExit(try s.run(["vault", "add", "--note", "--files-from", list]), 0)
            let items = try listedItems(s)
            #expect(items.count == 200)
            #expect(items.first { $0["name"] as? String == "n20.txt" }?["size"] as? Int == 100_000, "\(items.prefix(1))")
        }
    }

    @Test("on an 80-column terminal vault list fits: short unique IDs, times to the minute, long names cut with …; piped, every field is whole",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "needs util-linux script"))
    func listFitsTheTerminal() throws {
        try withSandbox { s in
            try s.initialize()
            let long = "a photo from the summer holiday at the lake with everyone there.jpg"
            let files = [try s.file(long, randomBytes(3_000)), try s.file("short.jpg", randomBytes(3_000))]
            expectExit(try s.run(["vault", "add"] + files), 0)
            let ids = try listedItems(s).map { $0["id"] as! String }
            let (transcript, status) = try runShellOnTerminal("stty cols 80 rows 20; $N11 vault list", typing: [], home: s.home)
            #expect(status == 0, "\(transcript)")
            let lines = transcript.components(separatedBy: CharacterSet(charactersIn: "\r\n")).filter { !$0.isEmpty }
            #expect(lines.count == 3, "\(transcript)")
            for line in lines { #expect(line.count <= 80, "'\(line)' is wider than the terminal") }
            for id in ids { #expect(transcript.contains(String(id.prefix(8))) && !transcript.contains(id), "\(transcript)") }
            #expect(transcript.contains("short.jpg") && transcript.contains("a photo from") && transcript.contains("…"), "\(transcript)")

            let piped = try s.run(["vault", "list"])
            for id in ids { #expect(piped.out.contains(id)) }
            #expect(piped.out.contains(long))
        }
    }
}
