import Foundation
import Glibc
import Testing
import N11TestSupport

/// Issue 27 from the command line: the README's nightly job with `--incremental`, into a
/// directory and onto a remote, restored elsewhere with nothing but the archives and a key.
@Suite("n11archive CLI: incremental nights", .serialized)
struct IncrementalCLITests {
    /// One night: `create --incremental` with the given extra options; returns its document.
    func night(_ s: Sandbox, into dir: String, _ extra: [String] = [], environment: [String: String] = [:]) throws -> [String: Any] {
        let run = try s.run(["create", "--portable", "--all-compartments", "--output-dir", dir, "--incremental", "--json"] + extra,
                            environment: environment)
        expectExit(run, 0)
        return try jsonDocument(run)
    }

    /// An item of `vault list --json` as it must come back (sorted keys, as text).
    static func comparable(_ item: [String: Any]) -> String {
        item.keys.sorted().map { "\($0)=\(item[$0]!)" }.joined(separator: ";")
    }

    @Test("nights into a directory: the first full, then only what changed; restore, verify, list, archives and prune of the newest; a moved dependency is found by ID, a missing one is 66")
    func localNights() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pub = try s.offlinePublicKey()
            let laptop = s.elsewhere("offline")
            let dir = s.path("backups")
            #expect(mkdir(dir, 0o700) == 0)
            let recipient = ["--recipient", pub]
            let first = try night(s, into: dir, recipient)
            #expect((first["dependsOn"] as? [String]) == [])
            usleep(1_100_000)
            let photo = try s.file("new.jpg", randomBytes(70_000))
            expectExit(try s.run(["vault", "add", photo]), 0)
            let second = try night(s, into: dir, recipient)
            #expect((second["dependsOn"] as? [String]) == [first["archiveId"] as! String] && second["newItems"] as? Int == 1)
            #expect((second["archiveBytes"] as! Int) < 70_000 + 8192, "\(second)")
            usleep(1_100_000)
            let third = try night(s, into: dir, recipient)
            #expect(third["newItems"] as? Int == 0 && (third["archiveBytes"] as! Int) < 8192, "an unchanged night: \(third)")
            usleep(1_100_000)
            let skipped = try s.run(["create", "--portable", "--all-compartments", "--output-dir", dir, "--incremental", "--skip-if-unchanged"] + recipient)
            expectExit(skipped, 0)
            #expect(skipped.out.contains("unchanged") && listing(of: dir).filter { $0.hasSuffix(".nu11vlt") }.count == 3, "\(skipped)")

            let newest = third["archive"] as! String
            // Restored into a vault: `vault list --json` as the vault's own.
            let vaultCopy = s.path("restored-vault")
            expectExit(try s.run(["restore", newest, "--vault", vaultCopy], environment: laptop), 0)
            let copied = try jsonDocument(try s.run(["vault", "list", "--json", "--vault", vaultCopy], environment: laptop))
            #expect(try s.list().items.map(Self.comparable) == (copied["items"] as? [[String: Any]] ?? []).map(Self.comparable))
            let export = s.path("export")
            expectExit(try s.run(["restore", newest, "--export", export], environment: laptop), 0)
            #expect(try readBytes(export + "/Photos/new.jpg") == readBytes(photo))
            #expect(try readBytes(export + "/Photos/more.jpg").count == 70001)
            expectExit(try s.run(["verify", newest], environment: laptop), 0)
            let listed = try jsonDocument(try s.run(["list", newest, "--json"], environment: laptop))
            let items = try #require(listed["items"] as? [[String: Any]])
            #expect(items.count == 6 && items.allSatisfy { $0["heldBy"] is String }, "an unchanged night holds nothing itself")
            let archives = try #require(try jsonDocument(try s.run(["archives", dir, "--json"]))["archives"] as? [[String: Any]])
            #expect(archives.first { $0["archive"] as? String == first["archive"] as? String }?["freesBytes"] as? Int == 0)

            // Renamed (any name): found by the ID in its header.
            let moved = dir + "/renamed-first.nu11vlt"
            #expect(rename(first["archive"] as! String, moved) == 0)
            expectExit(try s.run(["verify", newest], environment: laptop), 0)
            // Gone: 66, naming it; a salvage restores the rest; `archives` says so first.
            let aside = s.path("aside.nu11vlt")
            #expect(rename(moved, aside) == 0)
            let broken = try s.run(["archives", dir])
            expectExit(broken, 0)
            #expect(broken.out.contains("(1 MISSING)") && broken.err.contains("needs 1 archive(s) that are not here")
                    && broken.err.contains(String((first["archiveId"] as! String).prefix(8))), "\(broken)")
            let brokenJSON = try #require(try jsonDocument(try s.run(["archives", dir, "--json"]))["archives"] as? [[String: Any]])
            #expect(brokenJSON.contains { ($0["missingDependencies"] as? [String]) == [first["archiveId"] as! String] }, "\(brokenJSON)")
            let missing = try s.run(["restore", newest, "--vault", s.path("v1")], environment: laptop)
            expectExit(missing, 66)
            #expect(missing.err.contains(first["archiveId"] as! String), "\(missing)")
            let salvage = try s.run(["restore", newest, "--vault", s.path("v2"), "--salvage"], environment: laptop)
            expectExit(salvage, 3)
            #expect(rename(aside, first["archive"] as! String) == 0)

            // prune --keep-last 1 keeps the newest and what it needs.
            let pruned = try s.run(["prune", dir, "--keep-last", "1", "--json"])
            expectExit(pruned, 0)
            let doc = try jsonDocument(pruned)
            #expect((doc["deleted"] as? [String]) == [], "\(pruned)")
            let kept = try #require(doc["kept"] as? [[String: Any]])
            #expect(kept.contains { ($0["reasons"] as? [String])?.contains { $0.hasPrefix("needed by") } == true }, "\(pruned)")

            // A password added to the newest night alone does not open the nights it needs: said.
            let rekeyed = try s.run(["rekey", newest, "--add-password", "--new-password-file", try s.passwordFile(),
                                     "--drop-signature", "-o", s.path("rekeyed.nu11vlt")], environment: laptop)
            expectExit(rekeyed, 0)
            #expect(rekeyed.err.contains("is incremental") && rekeyed.err.contains(String((first["archiveId"] as! String).prefix(8)))
                    && rekeyed.err.contains("rekey each of them"), "\(rekeyed)")
        }
    }

    @Test("a night that added one note to a vault of many manifest pages points at the unchanged pages: --json and the summary say how many; the night restores as the vault, and a salvage without the full night names the lost pages (3)")
    func pagesPointedAt() throws {
        try withSandbox { s in
            try s.initialize()
            // One item in 4 ends a page (FORMAT.md §10.9 uses 4,096): many pages of few notes.
            // IDs are random, so the number of pages is too: of 24 notes, about one vault in 20
            // made 3 pages or fewer and failed the first check; of 64, about one in 300,000.
            let paged = ["N11_PAGE_AVERAGE": "4"]
            let notes = try (0..<64).map { try s.file("n\($0).txt", Array("note \($0)\n".utf8)) }
            expectExit(try s.run(["vault", "add", "--note"] + notes), 0)
            let dir = s.path("backups")
            #expect(mkdir(dir, 0o700) == 0)
            let password = ["--password-file", try s.passwordFile()], pw = password + fastKDF
            let first = try night(s, into: dir, pw, environment: paged)
            let pages = try #require(first["manifestPages"] as? Int)
            #expect(pages > 3 && first["pagesReused"] as? Int == 0, "\(first)")
            usleep(1_100_000)
            expectExit(try s.run(["vault", "add", "--note", try s.file("late.txt", Array("late\n".utf8))]), 0)
            let second = try night(s, into: dir, pw, environment: paged)
            let reused = try #require(second["pagesReused"] as? Int)
            #expect(second["newItems"] as? Int == 1 && reused >= pages - 1 && reused >= (second["manifestPages"] as! Int) - 2, "\(second)")
            usleep(1_100_000)
            expectExit(try s.run(["vault", "add", "--note", try s.file("later.txt", Array("later\n".utf8))]), 0)
            let third = try s.run(["create", "--portable", "--all-compartments", "--output-dir", dir, "--incremental"] + pw, environment: paged)
            expectExit(third, 0)
            #expect((third.out + third.err).contains("as are ") && (third.out + third.err).contains("manifest pages"), "\(third)")

            let newest = second["archive"] as! String
            let copy = s.path("restored-vault")
            expectExit(try s.run(["restore", newest, "--vault", copy] + password), 0)
            let copied = try jsonDocument(try s.run(["vault", "list", "--json", "--vault", copy]))
            let expected = (try s.list().items).filter { $0["name"] as? String != "later.txt" }.map(Self.comparable)
            #expect(expected.count == 65 && expected == (copied["items"] as? [[String: Any]] ?? []).map(Self.comparable))
            // Without the full night, its pages are lost: named, and the new note restored.
            let aside = s.path("aside.nu11vlt")
            #expect(rename(first["archive"] as! String, aside) == 0)
            let salvage = try s.run(["restore", newest, "--export", s.path("salvaged"), "--salvage"] + password)
            expectExit(salvage, 3)
            #expect(salvage.err.contains("manifest page(s) that do not read"), "\(salvage)")
            #expect(try readBytes(s.path("salvaged") + "/Notes/late.txt") == Array("late\n".utf8))
        }
    }

    @Test("nights onto a remote (webdav): only what changed is uploaded; restore of REMOTE:PATH fetches what it needs", .enabled(if: rcloneAvailable))
    func remoteNights() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let world = try RemoteWorld(s)
            let first = try night(s, into: "dav:backups", ["--password-file", pw] + fastKDF, environment: world.environment)
            usleep(1_100_000)
            let note = try s.file("n.txt", Array("a new note\n".utf8))
            expectExit(try s.run(["vault", "add", "--note", note]), 0)
            let second = try night(s, into: "dav:backups", ["--password-file", pw] + fastKDF, environment: world.environment)
            #expect((second["dependsOn"] as? [String]) == [first["archiveId"] as! String])
            let upload = try #require(second["upload"] as? [String: Any])
            #expect((upload["bytes"] as! Int) < 8192, "the second night uploaded \(upload)")
            let export = s.path("export")
            let restored = try world.run(["restore", second["archive"] as! String, "--password-file", pw, "--export", export], home: "elsewhere")
            expectExit(restored, 0)
            #expect(try readBytes(export + "/Notes/n.txt") == Array("a new note\n".utf8))
            #expect(listing(of: s.path("elsewhere/spool")).isEmpty, "fetched copies are removed")

            // Three more nights, each adding a note and removing the one before: the
            // newest then needs the first night only, and the middle ones can go.
            var previous = "n.txt"
            for n in 3...5 {
                usleep(1_100_000)
                let ids = try s.list().items.filter { $0["name"] as? String == previous }.compactMap { $0["id"] as? String }
                expectExit(try s.run(["vault", "rm"] + ids), 0)
                previous = "night\(n).txt"
                expectExit(try s.run(["vault", "add", "--note", try s.file(previous, Array("night \(n)\n".utf8))]), 0)
                _ = try night(s, into: "dav:backups", ["--password-file", pw] + fastKDF, environment: world.environment)
            }
            let planned = try world.run(["prune", "dav:backups", "--keep-last", "1", "--password-file", pw, "--dry-run", "--json"])
            expectExit(planned, 0)
            let plan = try jsonDocument(planned)
            let kept = try #require(plan["kept"] as? [[String: Any]], "\(planned)").compactMap { $0["archive"] as? String }
            #expect(kept.count == 2 && (plan["deleted"] as? [String])?.count == 3, "\(plan)")
            // prune killed at moments through its run: every kept night still verifies.
            for delay in [150_000, 450_000, 900_000] as [useconds_t] {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: n11archiveBinary)
                process.arguments = ["prune", "dav:backups", "--keep-last", "1", "--password-file", pw, "--quiet"]
                process.environment = ProcessInfo.processInfo.environment.merging(world.environment.merging(["N11_HOME": s.home]) { $1 }) { $1 }
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                usleep(delay)
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                for archive in kept { expectExit(try world.run(["verify", archive, "--password-file", pw], home: "verifier"), 0) }
            }
            expectExit(try world.run(["prune", "dav:backups", "--keep-last", "1", "--password-file", pw, "--lock-wait", "5"]), 0)
            #expect(Set(world.stored.filter { $0.hasPrefix("n11archive-") }.map { "dav:backups/" + $0 }) == Set(kept))
        }
    }
}
