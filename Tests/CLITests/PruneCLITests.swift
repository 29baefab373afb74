import Foundation
import Glibc
import Testing
import N11TestSupport

// create --output-dir (dated names) and prune (retention), through the built binary, and
// the unattended setups of Contrib/ (systemd units, crontab line) run against a sandbox.

/// The package's root (for Contrib/).
let packageRoot: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

func isDatedArchiveName(_ name: String) -> Bool {
    name.range(of: #"^n11archive-[0-9]{8}T[0-9]{6}Z(-[0-9]+)?\.nu11vlt$"#, options: .regularExpression) != nil
}

extension Sandbox {
    /// Makes `count` dated archives in `dir` (portable, fast KDF); returns their paths, oldest first.
    func datedArchives(_ count: Int, in dir: String, password: String) throws -> [String] {
        var paths: [String] = []
        for _ in 0..<count {
            let run = try self.run(["create", "--portable", "--output-dir", dir, "--password-file", password, "--json"] + fastKDF)
            expectExit(run, 0)
            paths.append(try #require(try jsonDocument(run)["archive"] as? String))
        }
        return paths
    }
}

@Suite("n11archive CLI: create --output-dir and prune")
struct PruneCLITests {
    @Test("archives lists in prune's order (header time, then -N in the same second) and shows undated archives too")
    func archivesOrder() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let dir = s.path("backups")
            #expect(mkdir(dir, 0o700) == 0)
            let dated = try s.datedArchives(3, in: dir, password: pw)   // likely within one second: -2, -3
            usleep(1_100_000)   // a later second than the dated ones
            let undated = dir + "/by-hand.nu11vlt"
            expectExit(try s.run(["create", "--portable", "-o", undated, "--password-file", pw] + fastKDF), 0)
            try writeBytes([1, 2, 3], to: dir + "/.n11tmp-123-x.nu11vlt.abc")
            let listed = try s.run(["archives", dir, "--json"])
            expectExit(listed, 0)
            let names = ((try jsonDocument(listed)["archives"] as? [[String: Any]]) ?? []).compactMap { $0["archive"] as? String }
            // The hand-made one is the newest by its header; then the dated ones, newest first.
            #expect(names == [undated] + dated.reversed(), "\(names)")

            // Another user's file is listed but never read (DESIGN.md §3.8); the text form has a header.
            let foreign = dir + "/planted.nu11vlt"
            try writeBytes(try readBytes(undated), to: foreign)
            #expect(chown(foreign, 65534, 65534) == 0)
            let json = try jsonDocument(try s.run(["archives", dir, "--json"]))
            let planted = ((json["archives"] as? [[String: Any]]) ?? []).first { $0["archive"] as? String == foreign }
            #expect(planted?["ownerUid"] as? Int == 65534 && planted?["created"] == nil, "\(String(describing: planted))")
            let text = try s.run(["archives", dir])
            #expect(text.out.hasPrefix("ARCHIVE ") && text.out.contains("(uid 65534's file: not read)"), "\(text)")
        }
    }


    @Test("--output-dir: UTC-stamped names, -2 when the name is taken, never overwriting")
    func datedNames() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let dir = s.path("backups")
            mkdir(dir, 0o700)
            // Decoys holding the bare names of the next few seconds: create must step around them.
            let now = Date()
            var decoys: [String] = []
            for offset in 0..<30 {
                let formatter = DateFormatter()
                formatter.locale = Locale(identifier: "en_US_POSIX")
                formatter.timeZone = TimeZone(identifier: "UTC")
                formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
                let name = "n11archive-\(formatter.string(from: now.addingTimeInterval(Double(offset)))).nu11vlt"
                decoys.append(try s.file("backups/" + name, Array("not an archive \(offset)".utf8)))
            }
            let run = try s.run(["create", "--portable", "--output-dir", dir, "--password-file", pw] + fastKDF)
            expectExit(run, 0)
            let decoyNames = Set(decoys.map(lastComponent))
            // Besides the archives, the directory holds create's lock file.
            let made = listing(of: dir).filter { !decoyNames.contains($0) && $0 != ".n11archive.lock" }
            #expect(made.count == 1, "\(listing(of: dir))")
            let name = try #require(made.first)
            #expect(isDatedArchiveName(name) && name.hasSuffix("Z-2.nu11vlt"), "\(name)")
            #expect(run.out.contains(dir + "/" + name), "the chosen path is printed: \(run)")
            for (offset, decoy) in decoys.enumerated() {
                #expect(try readBytes(decoy) == Array("not an archive \(offset)".utf8), "decoy \(decoy) changed")
            }
            expectExit(try s.run(["verify", dir + "/" + name, "--password-file", pw]), 0)

            // Exactly one of -o and --output-dir; the directory must exist.
            expectExit(try s.run(["create", "--portable", "-o", s.path("x"), "--output-dir", dir, "--password-file", pw]), 64)
            let missing = try s.run(["create", "--portable", "--output-dir", s.path("nowhere"), "--password-file", pw] + fastKDF)
            expectExit(missing, 66)
            #expect(missing.err.contains(s.path("nowhere")) && missing.err.contains("mkdir"), "\(missing)")
        }
    }

    @Test("prune deletes only its own archives past the policy; decoys, links and temp files survive; dry-run deletes nothing")
    func pruneKeepsDecoys() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let dir = s.path("backups")
            mkdir(dir, 0o700)
            let archives = try s.datedArchives(4, in: dir, password: pw)
            // Decoys, all named or placed to tempt a careless prune (old dates sort first).
            let foreign = try s.file("backups/n11archive-20200101T000000Z.nu11vlt", randomBytes(5000))
            let notes = try s.file("backups/notes.txt", Array("keep me".utf8))
            let temp = try s.file("backups/.n11tmp-999999-n11archive-20200101T000000Z.nu11vlt", randomBytes(100))
            let symlinkPath = dir + "/n11archive-20200102T000000Z.nu11vlt"
            #expect(symlink(archives[0], symlinkPath) == 0)
            mkdir(dir + "/sub", 0o700)
            let nested = dir + "/sub/n11archive-20200103T000000Z.nu11vlt"
            #expect(link(archives[1], nested) == 0)   // a real archive, but not directly in DIR
            let before = listing(of: dir).sorted()

            let dry = try s.run(["prune", dir, "--keep-last", "2", "--password-file", pw, "--dry-run", "--json"])
            expectExit(dry, 0)
            let d = try jsonDocument(dry)
            #expect(d["outcome"] as? String == "ok" && d["command"] as? String == "prune" && d["dryRun"] as? Bool == true)
            #expect(Set((d["deleted"] as? [String]) ?? []) == Set(archives[0..<2]), "\(dry)")
            #expect(((d["kept"] as? [[String: Any]]) ?? []).compactMap { $0["archive"] as? String } == [archives[3], archives[2]])
            #expect(d["verified"] as? String == archives[3])
            #expect((d["ignored"] as? [String]) == [foreign], "a foreign file with an archive's name is reported")
            #expect(listing(of: dir).sorted() == before, "a dry run deleted something")

            let pruned = try s.run(["prune", dir, "--keep-last", "2", "--password-file", pw])
            expectExit(pruned, 0)
            #expect(pruned.out.contains("deleted \(lastComponent(archives[0]))"), "\(pruned)")
            #expect(pruned.err.contains("warning:") && pruned.err.contains(foreign), "\(pruned)")
            #expect(!exists(archives[0]) && !exists(archives[1]) && exists(archives[2]) && exists(archives[3]))
            #expect(try readBytes(notes) == Array("keep me".utf8) && exists(foreign) && exists(temp) && exists(nested))
            var st = stat()
            #expect(lstat(symlinkPath, &st) == 0 && st.st_mode & S_IFMT == S_IFLNK, "the symlink was removed")

            // Nothing more to delete: nothing is verified, nothing changes.
            let again = try jsonDocument(try s.run(["prune", dir, "--keep-last", "2", "--json"]))
            #expect((again["deleted"] as? [String]) == [] && again["verified"] == nil)
        }
    }

    @Test("a newest archive that does not verify stops prune before anything is deleted")
    func damagedNewest() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let dir = s.path("backups")
            mkdir(dir, 0o700)
            let archives = try s.datedArchives(3, in: dir, password: pw)
            try flipByte(in: archives[2], at: Int(fileSize(archives[2])!) / 2)
            let before = listing(of: dir).sorted()

            let run = try s.run(["prune", dir, "--keep-last", "1", "--password-file", pw, "--json"])
            try expectErrorDocument(run, 65, command: "prune")
            let message = try #require(try jsonDocument(run)["error"] as? String)
            #expect(message.contains("nothing was deleted") && message.contains(archives[2]), "\(message)")
            #expect(listing(of: dir).sorted() == before)

            // A wrong password is the verification's failure too: 77, nothing deleted.
            let wrong = try s.passwordFile("nope\n", name: "wrong")
            expectExit(try s.run(["prune", dir, "--keep-last", "1", "--password-file", wrong]), 77)
            #expect(listing(of: dir).sorted() == before)
        }
    }

    @Test("a damaged newest archive gets prune's hint: make a new archive, then prune again")
    func damagedNewestHint() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let dir = s.path("backups")
            mkdir(dir, 0o700)
            let archives = try s.datedArchives(2, in: dir, password: pw)
            try flipByte(in: archives[1], at: Int(fileSize(archives[1])!) / 2)
            let run = try s.run(["prune", dir, "--keep-last", "1", "--password-file", pw])
            expectExit(run, 65)
            #expect(run.err.contains("hint:") && run.err.contains("create --output-dir") && run.err.contains("prune again"), "\(run)")
            #expect(!run.err.contains("use another copy"), "the verifier's hint does not fit a prune: \(run)")
            #expect(exists(archives[0]) && exists(archives[1]))
        }
    }

    @Test("a newest archive whose header does not read stops prune: an older one is not verified in its place")
    func unreadableNewest() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let dir = s.path("backups")
            mkdir(dir, 0o700)
            let archives = try s.datedArchives(3, in: dir, password: pw)
            // The newest by name, later than every readable one, but garbage (a damaged header).
            let broken = try s.file("backups/n11archive-29991231T235959Z.nu11vlt", randomBytes(4096))
            let before = listing(of: dir)
            let run = try s.run(["prune", dir, "--keep-last", "1", "--password-file", pw, "--json"])
            try expectErrorDocument(run, 65, command: "prune")
            let doc = try jsonDocument(run)
            #expect((doc["error"] as? String)?.contains(broken) == true && (doc["error"] as? String)?.contains("nothing was deleted") == true, "\(run)")
            #expect((doc["hint"] as? String)?.contains("n11archive info") == true, "\(run)")
            #expect(listing(of: dir) == before, "prune deleted archives while the newest is damaged")

            // The same second as the newest readable archive, but a later -N: also the newest.
            try FileManager.default.removeItem(atPath: broken)
            let stamped = lastComponent(archives[2]).prefix("n11archive-YYYYMMDDTHHMMSSZ".count)
            let sameSecond = dir + "/" + stamped + "-99.nu11vlt"
            try writeBytes(randomBytes(100), to: sameSecond)
            expectExit(try s.run(["prune", dir, "--keep-last", "1", "--password-file", pw]), 65)
            #expect(exists(archives[0]) && exists(archives[1]))

            // An unreadable file dated before the newest readable archive is only warned about.
            try FileManager.default.removeItem(atPath: sameSecond)
            let old = try s.file("backups/n11archive-20000101T000000Z.nu11vlt", randomBytes(100))
            let pruned = try s.run(["prune", dir, "--keep-last", "1", "--password-file", pw])
            expectExit(pruned, 0)
            #expect(pruned.err.contains("warning:") && pruned.err.contains(old), "\(pruned)")
            #expect(!exists(archives[0]) && !exists(archives[1]) && exists(archives[2]) && exists(old))
        }
    }

    @Test("prune on a file or a missing path says which, and gives no mkdir advice")
    func pruneNotADirectory() throws {
        try withSandbox { s in
            try s.initialize()
            let file = try s.file("backup.nu11vlt", Array("x".utf8))
            let onFile = try s.run(["prune", file, "--keep-last", "1"])
            expectExit(onFile, 66)
            #expect(onFile.err.contains("'\(file)' is not a directory") && onFile.err.contains("nothing was deleted"), "\(onFile)")
            #expect(!onFile.err.contains("mkdir") && onFile.err.contains("hint:"), "\(onFile)")
            #expect(try readBytes(file) == Array("x".utf8))
            let missing = try s.run(["prune", s.path("nowhere"), "--keep-last", "1"])
            expectExit(missing, 66)
            #expect(missing.err.contains("does not exist; nothing was deleted") && !missing.err.contains("mkdir"), "\(missing)")
            let createOnFile = try s.run(["create", "--secure", "--output-dir", file])
            expectExit(createOnFile, 66)
            #expect(createOnFile.err.contains("is not a directory; nothing was written"), "\(createOnFile)")
        }
    }

    @Test("prune: usage errors and a missing directory")
    func pruneUsage() throws {
        try withSandbox { s in
            let dir = s.path("backups")
            mkdir(dir, 0o700)
            let none = try s.run(["prune", dir])
            expectExit(none, 64)
            #expect(none.err.contains("--keep-last"), "\(none)")
            expectExit(try s.run(["prune", dir, "--keep-daily", "0"]), 64)
            expectExit(try s.run(["prune", dir, "--keep-last", "-1"]), 64)
            try expectErrorDocument(try s.run(["prune", s.path("nowhere"), "--keep-last", "1", "--json"]), 66, command: "prune")
            let empty = try s.run(["prune", dir, "--keep-last", "1"])
            expectExit(empty, 0)
            #expect(empty.err.contains("nothing to prune"), "\(empty)")
        }
    }

    @Test("policy on real archives: keep-daily keeps the newest of each day by the header's time")
    func pruneDailyOnRealArchives() throws {
        // Archives from one run share a day, so keep-daily 1 keeps only the newest; the
        // multi-day semantics are unit-tested in RetentionTests.
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let dir = s.path("backups")
            mkdir(dir, 0o700)
            let archives = try s.datedArchives(3, in: dir, password: pw)
            let doc = try jsonDocument(try s.run(["prune", dir, "--keep-daily", "1", "--password-file", pw, "--json"]))
            let kept = (doc["kept"] as? [[String: Any]]) ?? []
            #expect(kept.compactMap { $0["archive"] as? String } == [archives[2]])
            #expect((kept.first?["reasons"] as? [String]) == ["newest", "daily"])
            #expect(listing(of: dir) == [".n11archive.lock", lastComponent(archives[2])])
        }
    }
}

@Suite("Unattended use: the Contrib/ systemd units and crontab line run as written")
struct UnattendedTests {
    /// A command line split on spaces, with `"` removed and variables replaced.
    static func words(_ line: Substring, replacing: [String: String]) -> [String] {
        var text = String(line)
        for (key, value) in replacing { text = text.replacingOccurrences(of: key, with: value) }
        return text.replacingOccurrences(of: "\"", with: "").split(separator: " ").map(String.init)
    }

    /// Runs `commands` (each starting with /usr/local/bin/n11archive) in the sandbox; the
    /// create lines get the test's cheap Argon2id (the default would take seconds per run).
    static func runAll(_ commands: [[String]], in s: Sandbox) throws {
        for command in commands {
            #expect(command.first == "/usr/local/bin/n11archive", "\(command)")
            let arguments = Array(command.dropFirst()) + (command.dropFirst().first == "create" ? fastKDF : [])
            let run = try s.run(arguments)
            expectExit(run, 0)
            #expect(run.out.isEmpty, "--quiet: \(run)")
        }
    }

    /// The vault, and the public key of an identity kept in another home ("offline"): the
    /// machine that runs the job holds no secret that opens its archives.
    static func prepare(_ s: Sandbox) throws {
        _ = try s.fillVault()
        try FileManager.default.createDirectory(atPath: s.path(".config/n11archive"), withIntermediateDirectories: true)
        expectExit(try s.run(["init"], environment: s.elsewhere("offline")), 0)
        expectExit(try s.run(["key", "generate"], environment: s.elsewhere("offline")), 0)
        expectExit(try s.run(["key", "export-public", "-o", s.path(".config/n11archive/backup.pub")], environment: s.elsewhere("offline")), 0)
        mkdir(s.path("backups"), 0o700)
    }

    @Test("the service's ExecStart lines: create then prune, twice, leave verified dated archives")
    func systemdService() throws {
        let unit = try String(contentsOfFile: packageRoot + "/Contrib/systemd/n11archive-backup.service", encoding: .utf8)
        let lines = unit.split(separator: "\n").filter { $0.hasPrefix("ExecStart=") }.map { $0.dropFirst("ExecStart=".count) }
        #expect(lines.count == 2)
        try withSandbox { s in
            try Self.prepare(s)
            // %h is the user's home in a systemd user unit.
            let commands = lines.map { Self.words($0, replacing: ["%h": s.root]) }
            #expect(commands.allSatisfy { !$0.contains("--password-file") && $0.contains("--lock-wait") })
            #expect(commands[0].contains("--recipient"))
            try Self.runAll(commands, in: s)
            try Self.runAll(commands, in: s)
            let made = listing(of: s.path("backups")).filter { $0 != ".n11archive.lock" }
            #expect(!made.isEmpty && made.allSatisfy(isDatedArchiveName), "\(made)")
            for name in made {
                // Not here; with the offline identity, fully.
                expectExit(try s.run(["verify", s.path("backups/" + name)]), 77)
                expectExit(try s.run(["verify", s.path("backups/" + name)], environment: s.elsewhere("offline")), 0)
            }
        }
    }

    @Test("the crontab line runs as written")
    func crontab() throws {
        let text = try String(contentsOfFile: packageRoot + "/Contrib/cron/n11archive.crontab", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { !$0.hasPrefix("#") && !$0.isEmpty })
        let fields = line.split(separator: " ", maxSplits: 5)
        #expect(fields.count == 6)
        try withSandbox { s in
            try Self.prepare(s)
            let commands = fields[5].components(separatedBy: " && ").map { Self.words(Substring($0), replacing: ["$HOME": s.root]) }
            #expect(commands.count == 2 && commands.allSatisfy { !$0.contains("--password-file") && $0.contains("--lock-wait") })
            try Self.runAll(commands, in: s)
            #expect(listing(of: s.path("backups")).filter(isDatedArchiveName).count == 1)
        }
    }

    @Test("systemd-analyze accepts the units", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze"),
                                                          "systemd-analyze is not installed"))
    func systemdAnalyze() throws {
        // The units name /usr/local/bin/n11archive: verify against a copy whose ExecStart
        // points at the binary under test, so the check does not depend on an install.
        try withTemporaryDirectory { dir in
            for name in ["n11archive-backup.service", "n11archive-backup.timer"] {
                let text = try String(contentsOfFile: packageRoot + "/Contrib/systemd/" + name, encoding: .utf8)
                try text.replacingOccurrences(of: "/usr/local/bin/n11archive", with: n11archiveBinary)
                    .write(toFile: dir + "/" + name, atomically: true, encoding: .utf8)
            }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-analyze")
            // As system units: `--user` needs a user manager's runtime directory, which CI
            // containers lack; the syntax and directive checks are the same.
            process.arguments = ["verify", dir + "/n11archive-backup.service", dir + "/n11archive-backup.timer"]
            let errors = Pipe()
            process.standardError = errors
            process.standardOutput = errors
            try process.run()
            let output = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "\(output)")
        }
    }
}

func lastComponent(_ path: String) -> String { (path as NSString).lastPathComponent }
