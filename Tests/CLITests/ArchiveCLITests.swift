import Foundation
import Glibc
import Testing
import N11TestSupport

// The archive commands end to end through the built binary: create, info, list, verify and
// restore, every way of giving a password (and that a flag value is not one), the exit
// codes of the README table, and the independent FORMAT.md reader on a fresh archive.

/// Cheap Argon2id for tests; the default (3 passes, 256 MiB) is covered by the archiver tests.
let fastKDF = ["--kdf-ops", "1", "--kdf-memory", "8"]

extension Sandbox {
    /// A vault holding a few photos (across chunk boundaries) and a note; returns name → bytes.
    func fillVault() throws -> [String: [UInt8]] {
        try initialize()
        var originals: [String: [UInt8]] = [:]
        var files: [String] = []
        for (name, size) in [("empty.jpg", 0), ("one.jpg", 1), ("chunk.jpg", 65536), ("more.jpg", 70001)] {
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            files.append(try file(name, bytes))
            originals[name] = bytes
        }
        expectExit(try run(["vault", "add"] + files), 0)
        let note = Array("meet at the lighthouse at six\n".utf8)
        expectExit(try run(["vault", "add", "--note", try file("plan.txt", note)]), 0)
        originals["plan.txt"] = note
        return originals
    }

    func passwordFile(_ text: String = "correct horse battery staple\n", name: String = "password") throws -> String {
        let p = try file(name, Array(text.utf8))
        chmod(p, 0o600)
        return p
    }

    /// A copy of `archive` with one byte flipped 30,000 bytes before its end (in the last
    /// item's ciphertext): it unlocks, and fails when that item is read.
    func damagedCopy(of archive: String) throws -> String {
        var bytes = try readBytes(archive)
        bytes[bytes.count - 30_000] ^= 0x01
        return try file("damaged.nu11vlt", bytes)
    }

    /// Every file under `dir` (relative path → bytes), for before/after comparisons.
    func tree(_ dir: String) -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        guard let walker = FileManager.default.enumerator(atPath: dir) else { return out }
        while let relative = walker.nextObject() as? String {
            if relative.hasSuffix(".lock") { continue }
            if let bytes = try? readBytes(dir + "/" + relative) { out[relative] = bytes }
        }
        return out
    }
}

@Suite("n11archive CLI: archives")
struct ArchiveCLITests {

    @Test("portable: create, info without a secret, list, verify, restore on another home, export — byte for byte")
    func portableStory() throws {
        try withSandbox { s in
            let originals = try s.fillVault()
            let pw = try s.passwordFile()
            let archive = s.path("vault.nu11vlt")
            let created = try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF)
            expectExit(created, 0)
            #expect(created.out.contains("5 item(s)"), "\(created)")
            // Archives are owner-only, like the key store.
            var st = stat()
            #expect(stat(archive, &st) == 0 && st.st_mode & 0o777 == 0o600)

            let info = try s.run(["info", archive, "--json"])
            expectExit(info, 0)
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(info.stdout)) as? [String: Any])
            // Version 3 packs items: their number is in the encrypted manifest, not in `info`.
            #expect(summary["mode"] as? String == "portable" && summary["items"] == nil && summary["formatVersion"] as? Int == 3)
            // Signed by the key `init` made (its fingerprint, as `key list` shows it).
            let signing = try s.run(["key", "list"]).out.split(separator: "\n").first { $0.hasPrefix("signing") }?.split(separator: " ").last
            #expect((summary["packs"] as? Int ?? 0) >= 1 && (summary["pages"] as? Int ?? 0) >= 1
                    && (summary["signedBy"] as? String).map { $0.count == 16 && $0 == signing.map(String.init) } == true, "\(summary)")

            let listed = try s.run(["list", archive, "--json", "--password-file", pw])
            expectExit(listed, 0)
            let listing = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [String: Any])
            let names = Set(((listing["items"] as? [[String: Any]]) ?? []).compactMap { $0["name"] as? String })
            #expect(names == Set(originals.keys))

            expectExit(try s.run(["verify", archive, "--password-file", pw]), 0)

            // A new machine: another home, no key store yet.
            let elsewhere = ["N11_HOME": s.path("elsewhere")]
            let restored = try s.run(["restore", archive, "--password-file", pw], environment: elsewhere)
            expectExit(restored, 0)
            #expect(restored.err.contains("created"), "a key store is made for the restored vault: \(restored)")
            let back = try s.run(["vault", "list", "--json"], environment: elsewhere)
            let items = try #require((try JSONSerialization.jsonObject(with: Data(back.stdout)) as? [String: Any])?["items"] as? [[String: Any]])
            #expect(items.count == 5)
            for item in items {
                let id = try #require(item["id"] as? String), name = try #require(item["name"] as? String)
                let out = s.path("cat-\(id)")
                expectExit(try s.run(["vault", "cat", id, "-o", out], environment: elsewhere), 0)
                #expect(try readBytes(out) == originals[name], "\(name)")
            }

            // Restoring again changes nothing: every item is already there.
            let again = try s.run(["restore", archive, "--password-file", pw], environment: elsewhere)
            expectExit(again, 0)
            #expect(again.err.contains("skipped 5 item(s) already in the vault"), "\(again)")

            let export = s.path("export")
            expectExit(try s.run(["restore", archive, "--password-file", pw, "--export", export]), 0)
            for (name, bytes) in originals {
                let folder = name.hasSuffix(".txt") ? "Notes" : "Photos"
                #expect(try readBytes("\(export)/\(folder)/\(name)") == bytes, "\(name)")
            }
            // Exporting again onto the same files skips them all; onto a changed file it is a
            // conflict: 73, nothing rewritten.
            let exportedAgain = try s.run(["restore", archive, "--password-file", pw, "--export", export])
            expectExit(exportedAgain, 0)
            #expect(exportedAgain.err.contains("skipped \(originals.count) item(s) already exported unchanged"), "\(exportedAgain)")
            try writeBytes([0x21], to: "\(export)/Notes/plan.txt")
            let before = s.tree(export)
            expectExit(try s.run(["restore", archive, "--password-file", pw, "--export", export]), 73)
            #expect(s.tree(export) == before)
            // With --overwrite the user's own file is replaced, and said to be: in the dry run,
            // the summary and --json's `replaced`.
            let planned = try s.run(["restore", archive, "--password-file", pw, "--export", export, "--overwrite", "--dry-run", "--json"])
            expectExit(planned, 0)
            let plan = try jsonDocument(planned)
            #expect((plan["replaced"] as? [String])?.count == 1 && (plan["restored"] as? [String])?.isEmpty == true, "\(planned)")
            #expect(s.tree(export) == before)
            let overwritten = try s.run(["restore", archive, "--password-file", pw, "--export", export, "--overwrite"])
            expectExit(overwritten, 0)
            #expect(overwritten.out.contains("exported 1 item(s) (1 replaced)"), "\(overwritten)")
            #expect(try readBytes("\(export)/Notes/plan.txt") == originals["plan.txt"])
        }
    }

    @Test("every password source works: file, descriptor, command, and their environment variables")
    func passwordSources() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile("pässword with spaces \r\n")
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            expectExit(try s.run(["verify", archive, "--password-fd", "3"], descriptors: [3: pw]), 0)
            expectExit(try s.run(["verify", archive, "--password-command", "cat '\(pw)'"]), 0)
            expectExit(try s.run(["verify", archive], environment: ["N11_PASSWORD_FILE": pw]), 0)
            expectExit(try s.run(["verify", archive], environment: ["N11_PASSWORD_COMMAND": "cat '\(pw)'"]), 0)
            // The same password without the CR is the same password (FORMAT.md §3: first line).
            expectExit(try s.run(["verify", archive, "--password-file", try s.passwordFile("pässword with spaces \n", name: "lf-only")]), 0)
            // ...but a trailing space is part of it.
            expectExit(try s.run(["verify", archive, "--password-file", try s.passwordFile("pässword with spaces\n", name: "no-trailing-space")]), 77)
        }
    }

    @Test("no password as a flag value, none from nowhere, none empty; a failing command is 64 (no password was read)")
    func passwordRefusals() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let archive = s.path("a.nu11vlt")
            // There is no --password option: a value on the command line would show in ps.
            let flag = try s.run(["create", "--portable", "-o", archive, "--password", "hunter2"] + fastKDF)
            expectExit(flag, 64)
            #expect(!exists(archive))
            // No terminal and no source: a usage error that says how to give one.
            let none = try s.run(["create", "--portable", "-o", archive] + fastKDF)
            expectExit(none, 64)
            #expect(none.err.contains("--password-file"), "\(none)")
            #expect(!exists(archive))
            // An empty password is refused.
            let empty = try s.run(["create", "--portable", "-o", archive, "--password-file", try s.passwordFile("\n", name: "empty-password")] + fastKDF)
            #expect(empty.status != 0, "\(empty)")
            #expect(empty.err.contains("empty"), "\(empty)")
            #expect(!exists(archive))
            // A password command that fails: no password came, like a missing password file.
            let failing = try s.run(["create", "--portable", "-o", archive, "--password-command", "exit 3"] + fastKDF)
            expectExit(failing, 64)
            #expect(!exists(archive))
            #expect(listing(of: s.root).allSatisfy { !$0.hasPrefix(".n11tmp-") }, "no temp file left behind")
        }
    }

    @Test("create never replaces an existing file without --force (73); with --force it does")
    func createRefusesToReplace() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let existing = try s.file("keep.nu11vlt", Array("not an archive".utf8))
            let refused = try s.run(["create", "--secure", "-o", existing])
            expectExit(refused, 73)
            #expect(refused.err.contains(existing), "\(refused)")
            #expect(try readBytes(existing) == Array("not an archive".utf8))
            expectExit(try s.run(["create", "--secure", "-o", existing, "--force"]), 0)
            expectExit(try s.run(["verify", existing]), 0)
        }
    }

    @Test("wrong password is 77; a damaged archive is 65 for verify and restore, and the vault is untouched")
    func wrongPasswordAndDamage() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            let wrong = try s.run(["verify", archive, "--password-file", try s.passwordFile("Tr0ub4dor&3\n", name: "wrong-password")])
            expectExit(wrong, 77)
            #expect(wrong.err.contains("wrong password"), "\(wrong)")
            #expect(!wrong.err.contains("Tr0ub4dor"), "the password never appears in messages")

            // Flip one byte inside the last item's data (well before the central directory).
            var bytes = try readBytes(archive)
            let target = try #require(bytes.count > 40_000 ? bytes.count - 30_000 : nil)
            bytes[target] ^= 0x01
            let damaged = try s.file("damaged.nu11vlt", bytes)

            let vaultBefore = s.tree(s.vault)
            let verify = try s.run(["verify", damaged, "--password-file", pw])
            expectExit(verify, 65)
            #expect(verify.err.contains(damaged), "\(verify)")
            let restore = try s.run(["restore", damaged, "--password-file", pw, "--vault", s.path("fresh"), "--overwrite"])
            expectExit(restore, 65)
            #expect(listing(of: s.path("fresh")).allSatisfy { $0 == ".lock" || $0 == ".n11vault" || ["Photos", "Notes", "Meta"].contains($0) })
            #expect(s.tree(s.path("fresh") + "/Photos").isEmpty && s.tree(s.path("fresh") + "/Meta").isEmpty)
            let export = try s.run(["restore", damaged, "--password-file", pw, "--export", s.path("out")])
            expectExit(export, 65)
            #expect(!exists(s.path("out")), "a failed export leaves no directory behind")
            #expect(s.tree(s.vault) == vaultBefore)

            // Not an archive at all, and no archive at all.
            expectExit(try s.run(["info", try s.file("plain.txt", Array("hello".utf8))]), 65)
            expectExit(try s.run(["info", s.path("missing.nu11vlt")]), 66)
        }
    }

    @Test("a secure archive restores only where its key is: elsewhere 77, saying it is bound to that machine")
    func secureIsBound() throws {
        try withSandbox { s in
            let originals = try s.fillVault()
            let archive = s.path("s.nu11vlt")
            expectExit(try s.run(["create", "--secure", "-o", archive]), 0)
            let info = try s.run(["info", archive])
            #expect(info.out.contains("secure"), "\(info)")

            let other = ["N11_HOME": s.path("other")]
            expectExit(try s.run(["init"], environment: other), 0)
            let refused = try s.run(["restore", archive], environment: other)
            expectExit(refused, 77)
            #expect(refused.err.contains("bound to the machine"), "\(refused)")
            expectExit(try s.run(["verify", archive], environment: other), 77)

            // Here it restores (into another vault of the same home) byte for byte.
            let vault2 = s.path("vault2")
            expectExit(try s.run(["restore", archive, "--vault", vault2]), 0)
            let export = s.path("secure-export")
            expectExit(try s.run(["restore", archive, "--export", export]), 0)
            for (name, bytes) in originals {
                let folder = name.hasSuffix(".txt") ? "Notes" : "Photos"
                #expect(try readBytes("\(export)/\(folder)/\(name)") == bytes, "\(name)")
            }
        }
    }

    @Test("restore --dry-run verifies and reports, writing nothing")
    func dryRun() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            let other = ["N11_HOME": s.path("other")]
            expectExit(try s.run(["init"], environment: other), 0)
            let before = s.tree(s.path("other"))
            let dry = try s.run(["restore", archive, "--password-file", pw, "--dry-run"], environment: other)
            expectExit(dry, 0)
            #expect(dry.out.contains("would restore 5 item(s)"), "\(dry)")
            #expect(s.tree(s.path("other")) == before)
            // Into a vault that is not there yet (restore --help's example): every item would
            // be restored, nothing is made; a secure archive's inner tags are checked too.
            let secure = s.path("s.nu11vlt")
            expectExit(try s.run(["create", "--secure", "-o", secure]), 0)
            for (archive, password) in [(archive, ["--password-file", pw]), (secure, [])] {
                let newVault = try s.run(["restore", archive, "--vault", s.path("vault2"), "--dry-run"] + password)
                expectExit(newVault, 0)
                #expect(newVault.out.contains("would restore 5 item(s)") && !newVault.err.contains("without comparing"), "\(newVault)")
                #expect(!exists(s.path("vault2")))
            }
        }
    }

    @Test("core dumps are off in the running tool (RLIMIT_CORE 0) while it waits for a secret")
    func coreDumpsDisabled() throws {
        let sandbox = try Sandbox()
        defer { sandbox.remove() }
        try sandbox.initialize(["--pin", "--pin-file", try sandbox.file("pin", Array("24681357\n".utf8))])
        let (line, status) = try coreLimitWhileWaitingForPIN(home: sandbox.home, pin: "24681357\n")
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        #expect(fields.count >= 6 && fields[4] == "0" && fields[5] == "0", "core limit: \(line)")
        #expect(status == 0)
    }

    static let referenceReaderAvailable: Bool = {
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        probe.arguments = ["python3", "-c", "from cryptography.hazmat.primitives.kdf.argon2 import Argon2id"]
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    @Test("FORMAT.md suffices: the independent Python reader decrypts a fresh archive byte for byte",
          .enabled(if: referenceReaderAvailable, "needs python3 with cryptography >= 44 (Argon2id)"))
    func referenceReader() throws {
        try withSandbox { s in
            let originals = try s.fillVault()
            // A fade item too, so `expires` is exercised.
            expectExit(try s.run(["vault", "add", "--fade", "7d", try s.file("fading.jpg", [9, 8, 7])]), 0)
            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../Scripts/format-reference.py").standardized.path
            let export = s.path("reference-export")
            let reader = Process()
            reader.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            reader.arguments = ["python3", script, archive, "--password-file", pw, "--export", export]
            reader.standardOutput = FileHandle.nullDevice
            reader.standardError = FileHandle.nullDevice
            try reader.run()
            reader.waitUntilExit()
            #expect(reader.terminationStatus == 0)
            let listed = try s.run(["list", archive, "--json", "--password-file", pw])
            let items = try #require((try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [String: Any])?["items"] as? [[String: Any]])
            #expect(items.count == 6)
            for item in items {
                let id = try #require(item["id"] as? String), name = try #require(item["name"] as? String)
                let expected = name == "fading.jpg" ? [9, 8, 7] : originals[name]
                #expect(try readBytes("\(export)/\(id)") == expected, "\(name)")
            }
        }
    }
}

/// Starts `vault list --pin-fd 0` with a pipe as stdin that stays open, so the tool blocks
/// reading the PIN; reads its "Max core file size" line from /proc meanwhile, then sends
/// the PIN. Returns that line and the exit status.
func coreLimitWhileWaitingForPIN(home: String, pin: String) throws -> (String, Int32) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: n11archiveBinary)
    process.arguments = ["vault", "list", "--pin-fd", "0"]
    process.environment = ["N11_HOME": home, "PATH": "/usr/bin:/bin"]
    let input = Pipe()
    process.standardInput = input
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    var line = ""
    // The limit is set first thing at start-up; poll until soft and hard limit are both 0
    // (the soft one often is already) or give up after 2 s.
    for _ in 0..<200 {
        let limits = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/limits", encoding: .utf8)) ?? ""
        line = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") }.map(String.init) ?? ""
        if Array(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2)) == ["0", "0"] { break }
        usleep(10_000)
    }
    try input.fileHandleForWriting.write(contentsOf: Data(pin.utf8))
    try input.fileHandleForWriting.close()
    process.waitUntilExit()
    return (line, process.terminationStatus)
}

@Suite("n11archive CLI: damage, repair and clean failure")
struct RepairCLITests {
    @Test("vault verify names a damaged record and a damaged content file, counts every item, and exits 65")
    func vaultVerifyNamesBoth() throws {
        try withSandbox { s in
            let originals = try s.fillVault()
            let victim = try #require(s.contentFiles().max { (fileSize($0) ?? 0) < (fileSize($1) ?? 0) })
            try flipByte(in: victim, at: 30_000)
            let records = try TestCatalogue.records(in: s.vault)
            let badRecord = try #require(records.first { !victim.contains($0.id) })
            try TestCatalogue.flipRecordByte(id: badRecord.id, at: 30, in: s.vault)
            let verify = try s.run(["vault", "verify"])
            expectExit(verify, 65)
            #expect(verify.err.contains(badRecord.id), "the damaged record is named: \(verify)")
            #expect(verify.err.contains("2 of \(originals.count) item(s) failed verification"), "\(verify)")
            #expect(verify.out.isEmpty, "no ok line: \(verify)")
        }
    }

    @Test("restore repairs an item whose content was damaged instead of skipping it as identical")
    func restoreRepairs() throws {
        try withSandbox { s in
            let originals = try s.fillVault()
            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            // Damage one photo's content in the middle (its size and tag stay the same).
            let victim = try #require(s.contentFiles().max { (fileSize($0) ?? 0) < (fileSize($1) ?? 0) })
            try flipByte(in: victim, at: 30_000)
            expectExit(try s.run(["vault", "verify"]), 65)
            let restored = try s.run(["restore", archive, "--password-file", pw])
            expectExit(restored, 0)
            #expect(restored.err.contains("repaired 1 damaged item"), "\(restored)")
            expectExit(try s.run(["vault", "verify"]), 0)
            let listing = try s.list()
            for item in listing.items {
                let id = try #require(item["id"] as? String), name = try #require(item["name"] as? String)
                expectExit(try s.run(["vault", "cat", id, "-o", s.path("out-\(id)")]), 0)
                #expect(try readBytes(s.path("out-\(id)")) == originals[name], "\(name)")
            }
        }
    }

    @Test("a damaged item record: list shows the others and exits 65 naming it; rm FULL-ID removes it")
    func damagedRecord() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let metas = try TestCatalogue.records(in: s.vault)
            let id = try #require(metas.first).id
            try TestCatalogue.flipRecordByte(id: id, at: 30, in: s.vault)
            let list = try s.run(["vault", "list", "--json"])
            expectExit(list, 65)
            #expect(list.err.contains(id), "\(list)")
            let others = try #require((try JSONSerialization.jsonObject(with: Data(list.stdout)) as? [String: Any])?["items"] as? [[String: Any]])
            #expect(others.count == metas.count - 1)
            // An archive would silently miss it: create refuses, naming it.
            let create = try s.run(["create", "--secure", "-o", s.path("s.nu11vlt")])
            expectExit(create, 65)
            #expect(create.err.contains(id) && !exists(s.path("s.nu11vlt")), "\(create)")
            expectExit(try s.run(["vault", "rm", id]), 0)
            expectExit(try s.run(["vault", "verify"]), 0)
            #expect(try s.list().items.count == metas.count - 1)
        }
    }

    @Test("a failed restore on a machine without a key store leaves no key store and no vault")
    func failedRestoreLeavesNothing() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            let damaged = try s.damagedCopy(of: archive)
            let fresh = ["N11_HOME": s.path("fresh")]
            expectExit(try s.run(["restore", damaged, "--password-file", pw], environment: fresh), 65)
            #expect(!exists(s.path("fresh")), "the failed restore left \(listing(of: s.path("fresh")))")
            // A wrong password likewise creates nothing.
            expectExit(try s.run(["restore", archive, "--password-file", try s.passwordFile("nope\n", name: "wrong")],
                                 environment: fresh), 77)
            #expect(!exists(s.path("fresh")))
            // A dry run needs no key store and makes none.
            let dry = try s.run(["restore", archive, "--password-file", pw, "--dry-run"], environment: fresh)
            expectExit(dry, 0)
            #expect(dry.out.contains("would restore 5 item(s)"), "\(dry)")
            #expect(!exists(s.path("fresh")))
        }
    }

    @Test("a secure restore with a PIN-protected key store reads the PIN once (--pin-fd works)")
    func secureRestorePINOnce() throws {
        try withSandbox { s in
            let pinFile = try s.file("pin", Array("13572468\n".utf8))
            try s.initialize(["--pin", "--pin-file", pinFile])
            expectExit(try s.run(["vault", "add", "--pin-file", pinFile, try s.file("a.jpg", [1, 2, 3])]), 0)
            let archive = s.path("s.nu11vlt")
            expectExit(try s.run(["create", "--secure", "-o", archive, "--pin-file", pinFile]), 0)
            expectExit(try s.run(["restore", archive, "--vault", s.path("v2"), "--pin-fd", "3"], descriptors: [3: pinFile]), 0)
            expectExit(try s.run(["vault", "verify", "--vault", s.path("v2"), "--pin-file", pinFile]), 0)
        }
    }
}
