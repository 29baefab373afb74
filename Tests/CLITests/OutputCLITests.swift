import Foundation
import Glibc
import Testing
import N11TestSupport

// --json, --quiet and --progress of the archive commands, through the built binary. Output
// goes to files here (never a terminal), so no progress appears unless --progress asks.

/// The one JSON document a run printed on stdout (fails the test if there is not exactly one).
func jsonDocument(_ result: RunResult, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
    let object = try JSONSerialization.jsonObject(with: Data(result.stdout))
    return try #require(object as? [String: Any], "stdout is not one JSON object: \(result)", sourceLocation: sourceLocation)
}

/// Checks that a streamed document is laid out as one pretty-printed document: every line
/// indented two spaces per level of nesting, the elements of a listing included (each is
/// encoded on its own and moved right to its place).
func expectNestedIndentation(_ result: RunResult, sourceLocation: SourceLocation = #_sourceLocation) {
    var depth = 0
    for line in result.out.split(separator: "\n") {
        let body = line.drop { $0 == " " }
        let closing = body.first == "}" || body.first == "]"
        #expect(line.count - body.count == 2 * (depth - (closing ? 1 : 0)), "line '\(line)' is not indented for its depth \(depth)",
                sourceLocation: sourceLocation)
        var inString = false, escaped = false
        for c in body {
            if inString {
                if escaped { escaped = false } else if c == "\\" { escaped = true } else if c == "\"" { inString = false }
            } else if c == "\"" {
                inString = true
            } else if c == "{" || c == "[" {
                depth += 1
            } else if c == "}" || c == "]" {
                depth -= 1
            }
        }
    }
    #expect(depth == 0, sourceLocation: sourceLocation)
}

/// Checks an error document: outcome, the same exit code as the process, a message, the command.
func expectErrorDocument(_ result: RunResult, _ code: Int32, command: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    expectExit(result, code, sourceLocation: sourceLocation)
    let doc = try jsonDocument(result, sourceLocation: sourceLocation)
    #expect(doc["outcome"] as? String == "error", "\(result)", sourceLocation: sourceLocation)
    #expect(doc["exitCode"] as? Int == Int(result.status), "\(result)", sourceLocation: sourceLocation)
    #expect(doc["command"] as? String == command, "\(result)", sourceLocation: sourceLocation)
    #expect(!((doc["error"] as? String) ?? "").isEmpty, "\(result)", sourceLocation: sourceLocation)
    #expect(doc["durationSeconds"] is Double || doc["durationSeconds"] is Int, sourceLocation: sourceLocation)
}

@Suite("n11archive CLI: --json, --quiet, --progress")
struct OutputCLITests {
    static let secretWord = "correct horse battery staple"

    @Test("every archive command prints one JSON document with the documented fields, and no secret")
    func documents() throws {
        try withSandbox { s in
            let originals = try s.fillVault()
            let pw = try s.passwordFile()
            let archive = s.path("vault.nu11vlt")
            var everything = ""

            let created = try s.run(["create", "--portable", "-o", archive, "--password-file", pw, "--json"] + fastKDF)
            expectExit(created, 0)
            let c = try jsonDocument(created)
            #expect(c["outcome"] as? String == "ok" && c["command"] as? String == "create")
            #expect(c["items"] as? Int == 5 && c["mode"] as? String == "portable")
            #expect(c["plaintextBytes"] as? Int == originals.values.reduce(0) { $0 + $1.count })
            #expect(c["archiveBytes"] as? Int == Int(fileSize(archive) ?? -1))
            #expect(c["archive"] as? String == archive && (c["skippedExpired"] as? [String]) == [])
            let id = try #require(c["archiveId"] as? String)
            #expect(id.count == 32)
            everything += created.out + created.err

            let verified = try s.run(["verify", archive, "--password-file", pw, "--json"])
            expectExit(verified, 0)
            let v = try jsonDocument(verified)
            #expect(v["outcome"] as? String == "ok" && v["command"] as? String == "verify" && v["archiveId"] as? String == id)
            #expect(v["items"] as? Int == 5 && v["plaintextBytes"] as? Int == c["plaintextBytes"] as? Int && v["mode"] as? String == "portable")
            everything += verified.out + verified.err

            let info = try s.run(["info", archive, "--json"])
            let i = try jsonDocument(info)
            #expect(i["outcome"] as? String == "ok" && i["command"] as? String == "info" && i["archiveId"] as? String == id)
            let pages = try #require(i["pages"] as? Int), packs = try #require(i["packs"] as? Int)
            // header, header.mac, header.sig (the home signs: `init` made its key), root.
            #expect(i["items"] == nil && i["entries"] as? Int == 4 + pages + packs && i["formatVersion"] as? Int == 3)
            #expect(i["signedBy"] as? String == c["signedBy"] as? String && (i["signerKey"] as? String)?.count == 64 && i["trusted"] == nil)
            #expect(i["archiveBytes"] as? Int == Int(fileSize(archive)!) && (i["dependsOn"] as? [String]) == [])
            // The same quantity has the same name in every document.
            #expect(i["archiveBytes"] as? Int == c["archiveBytes"] as? Int && i["size"] == nil)
            let slots = try #require(i["slots"] as? [[String: Any]])
            #expect(slots.count == 1 && slots[0]["type"] as? String == "password")
            #expect((slots[0]["kdf"] as? [String: Any])?["opsLimit"] as? Int == 1)

            let listed = try s.run(["list", archive, "--password-file", pw, "--json"])
            let l = try jsonDocument(listed)
            #expect(l["outcome"] as? String == "ok" && l["command"] as? String == "list" && l["archiveId"] as? String == id)
            let items = try #require(l["items"] as? [[String: Any]])
            expectNestedIndentation(listed)
            #expect(Set(items.compactMap { $0["name"] as? String }) == Set(originals.keys))
            let ids = Set(items.compactMap { $0["id"] as? String })
            everything += listed.out + listed.err

            let vaultListed = try s.run(["vault", "list", "--json"])
            let vl = try jsonDocument(vaultListed)
            expectNestedIndentation(vaultListed)
            #expect(vl["outcome"] as? String == "ok" && vl["command"] as? String == "vault list")
            #expect(Set(((vl["items"] as? [[String: Any]]) ?? []).compactMap { $0["id"] as? String }) == ids)
            #expect(vl["expiredHidden"] as? Int == 0 && (vl["damaged"] as? [String]) == [])

            // restore: dry run, then for real into another home, then again (all skipped).
            let elsewhere = ["N11_HOME": s.path("elsewhere")]
            let dry = try s.run(["restore", archive, "--password-file", pw, "--dry-run", "--json"], environment: elsewhere)
            let d = try jsonDocument(dry)
            #expect(d["outcome"] as? String == "ok" && d["command"] as? String == "restore" && d["dryRun"] as? Bool == true)
            #expect(Set((d["restored"] as? [String]) ?? []) == ids && d["target"] as? String == "vault")
            #expect(!exists(s.path("elsewhere")), "a dry run wrote something")

            let restored = try s.run(["restore", archive, "--password-file", pw, "--json"], environment: elsewhere)
            let r = try jsonDocument(restored)
            #expect(r["dryRun"] as? Bool == false && r["items"] as? Int == 5 && r["createdKeyStore"] as? Bool == true)
            #expect(Set((r["restored"] as? [String]) ?? []) == ids && (r["replaced"] as? [String]) == [] && (r["repaired"] as? [String]) == [])
            #expect(r["destination"] as? String == s.path("elsewhere") + "/vault" && r["archiveId"] as? String == id)
            everything += restored.out + restored.err

            let again = try jsonDocument(try s.run(["restore", archive, "--password-file", pw, "--json"], environment: elsewhere))
            #expect(Set((again["skippedIdentical"] as? [String]) ?? []) == ids && again["items"] as? Int == 0)

            let exported = try s.run(["restore", archive, "--password-file", pw, "--export", s.path("out"), "--json"])
            let e = try jsonDocument(exported)
            #expect(e["target"] as? String == "export" && e["destination"] as? String == s.path("out") && Set((e["restored"] as? [String]) ?? []) == ids)

            // No secret and no plaintext in any of it (item names are metadata and allowed).
            #expect(!everything.contains(Self.secretWord))
            #expect(!everything.contains("lighthouse"))
        }
    }

    @Test("failures with --json: one error document whose exitCode is the process's")
    func errorDocuments() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let wrong = try s.passwordFile("not it\n", name: "wrong")
            let archive = s.path("vault.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)

            try expectErrorDocument(try s.run(["verify", archive, "--password-file", wrong, "--json"]), 77, command: "verify")
            try expectErrorDocument(try s.run(["list", archive, "--password-file", wrong, "--json"]), 77, command: "list")
            try expectErrorDocument(try s.run(["info", s.path("missing.nu11vlt"), "--json"]), 66, command: "info")
            try expectErrorDocument(try s.run(["restore", s.path("missing.nu11vlt"), "--json"]), 66, command: "restore")
            // Usage errors happen while parsing, before any option is known; still one document.
            try expectErrorDocument(try s.run(["create", "--portable", "--json"]), 64, command: "create")
            try expectErrorDocument(try s.run(["create", "--portable", "-o", archive, "--password-file", pw, "--json"] + fastKDF), 73, command: "create")
            let existsDoc = try jsonDocument(try s.run(["create", "--portable", "-o", archive, "--password-file", pw, "--json"] + fastKDF))
            #expect((existsDoc["hint"] as? String)?.contains("--force") == true, "\(existsDoc)")

            // A damaged archive: 65, and the document names the archive.
            try flipByte(in: archive, at: Int(fileSize(archive)!) / 2)
            let damaged = try s.run(["verify", archive, "--password-file", pw, "--json"])
            try expectErrorDocument(damaged, 65, command: "verify")
            #expect((try jsonDocument(damaged)["error"] as? String)?.contains(archive) == true)

            // vault list with a damaged record: the listing itself carries the error, once.
            let victim = try #require(try TestCatalogue.records(in: s.vault).first)
            try TestCatalogue.flipRecordByte(id: victim.id, at: 30, in: s.vault)
            let listed = try s.run(["vault", "list", "--json"])
            try expectErrorDocument(listed, 65, command: "vault list")
            let doc = try jsonDocument(listed)
            #expect((doc["damaged"] as? [String])?.count == 1 && (doc["items"] as? [Any])?.count == 4)
        }
    }

    @Test("--quiet prints nothing but errors and warnings; notes and summaries go")
    func quiet() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let archive = s.path("vault.nu11vlt")
            let created = try s.run(["create", "--portable", "-o", archive, "--password-file", pw, "--quiet"] + fastKDF)
            expectExit(created, 0)
            #expect(created.out.isEmpty, "\(created)")
            // The weak-KDF warning survives --quiet (README says why); nothing else is said.
            #expect(created.err == "n11archive: warning: Argon2id below the moderate profile (3 passes, 256 MiB) makes the password easier to guess\n", "\(created)")

            let restored = try s.run(["restore", archive, "--password-file", pw, "--quiet"], environment: ["N11_HOME": s.path("other")])
            expectExit(restored, 0)
            #expect(restored.out.isEmpty && restored.err.isEmpty, "\(restored)")   // without --quiet: a note about the new key store
            let verified = try s.run(["verify", archive, "--password-file", pw, "-q"])
            #expect(verified.out.isEmpty && verified.err.isEmpty, "\(verified)")

            // Errors still come through.
            let missing = try s.run(["verify", s.path("nope.nu11vlt"), "--quiet"])
            expectExit(missing, 66)
            #expect(missing.err.contains("n11archive: error:") && missing.err.contains("nope.nu11vlt"))
        }
    }

    @Test("progress: none when stderr is not a terminal, plain lines with --progress, never with --quiet")
    func progress() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let archive = s.path("vault.nu11vlt")
            let plain = try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF)
            expectExit(plain, 0)
            #expect(!plain.err.contains(" items "), "progress without a terminal: \(plain)")

            let created = try s.run(["create", "--portable", "-o", s.path("b.nu11vlt"), "--password-file", pw, "--progress"] + fastKDF)
            expectExit(created, 0)
            let lines = created.err.split(separator: "\n").filter { $0.hasPrefix("n11archive: create ") }
            #expect(lines.first?.hasPrefix("n11archive: create 0/5 items  0 B/") == true, "\(created)")
            #expect(lines.last?.hasPrefix("n11archive: create 5/5 items  ") == true && lines.last?.contains(" in ") == true, "\(created)")
            #expect(!created.err.contains("\r") && !created.err.contains("\u{1B}"), "control characters in a log")

            // The dry run on another machine: with all items already in this vault, it would
            // have nothing to do (0/0 items).
            for command in [["verify", archive], ["restore", archive, "--dry-run"], ["restore", archive, "--export", s.path("out")]] {
                let run = try s.run(command + ["--password-file", pw, "--progress"], environment: ["N11_HOME": s.path("other")])
                expectExit(run, 0)
                #expect(run.err.contains("5/5 items"), "\(run)")
            }

            let both = try s.run(["verify", archive, "--password-file", pw, "--progress", "--quiet"])
            expectExit(both, 64)
            #expect(both.err.contains("--quiet and --progress"), "\(both)")
        }
    }

    @Test("progress line text: bar, grouped counts, sizes, rate, ETA")
    func progressText() throws {
        // The renderer lives in the executable; its format is checked through --progress above
        // and here through the documented example's shape on a real run with a large item.
        try withSandbox { s in
            try s.initialize()
            let big = try s.file("big.jpg", randomBytes(6 << 20))
            expectExit(try s.run(["vault", "add", big]), 0)
            let pw = try s.passwordFile()
            let run = try s.run(["create", "--portable", "-o", s.path("a.nu11vlt"), "--password-file", pw, "--progress"] + fastKDF)
            expectExit(run, 0)
            let last = try #require(run.err.split(separator: "\n").last { $0.hasPrefix("n11archive: create ") })
            #expect(last.contains("1/1 items  6.0 MiB/6.0 MiB  ") && last.contains("/s  in 0:"), "\(last)")
        }
    }
}
