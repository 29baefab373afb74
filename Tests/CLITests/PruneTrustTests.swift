import Foundation
import Glibc
import Testing
import N11TestSupport

/// "Nobody else decides what prune deletes, or blocks it" (README, DESIGN.md §3.8): the
/// planted files of issue 25's second security review (findings 2–5), each of which steered
/// or stopped a prune before.
@Suite("prune: planted archives neither steer nor stop it")
struct PruneTrustTests {
    /// This home with an identity, and its public key in a file (exported 0644: meant to be shared).
    func publicKey(_ s: Sandbox) throws -> String {
        expectExit(try s.run(["key", "generate"]), 0)
        return try s.file("mine.pub", Array(try s.run(["key", "export-public"]).stdout))
    }

    /// A stranger's home with one item.
    func stranger(_ s: Sandbox, _ name: String = "stranger") throws -> [String: String] {
        let home = s.elsewhere(name)
        expectExit(try s.run(["init"], environment: home), 0)
        expectExit(try s.run(["vault", "add", try s.file("\(name).jpg", randomBytes(3000))], environment: home), 0)
        return home
    }

    @Test("archives a stranger made with our public key open with our identity but do not count: prune keeps ours")
    func strangersRecipientArchives() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let pub = try publicKey(s)
            let dir = s.path("backups")
            #expect(mkdir(dir, 0o700) == 0)
            let ours = try s.datedArchives(3, in: dir, password: pw)
            let stranger = try stranger(s)
            var forged: [String] = []
            for _ in 0..<3 {
                let run = try s.run(["create", "--portable", "--recipient", pub, "--output-dir", dir, "--json"], environment: stranger)
                expectExit(run, 0)
                forged.append(try #require(try jsonDocument(run)["archive"] as? String))
            }
            // Our identity opens them: they look like ours to anything that only tries keys.
            expectExit(try s.run(["verify", forged[2]]), 0)

            let pruned = try s.run(["prune", dir, "--keep-last", "3", "--password-file", pw, "--json"])
            expectExit(pruned, 0)
            let doc = try jsonDocument(pruned)
            #expect((doc["deleted"] as? [String]) == [], "our archives were pushed out by forgeries: \(pruned)")
            #expect(Set((doc["notOpened"] as? [String]) ?? []) == Set(forged), "\(pruned)")
            #expect(ours.allSatisfy(exists) && forged.allSatisfy(exists))
        }
    }

    @Test("on the write-only machine, another user's re-dated copies of its archives under their real IDs do not count; the user's own altered copy stops prune")
    func forgedRecordedIDs() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let dir = s.path("backups")
            // Whole seconds between the second and the newest, for the forgeries' dates.
            let made = try s.recipientArchives(3, for: try s.offlinePublicKey(), in: dir) { if $0 == 2 { usleep(2_100_000) } }
            // Just below the newest, under the two older archives' IDs.
            let info = try jsonDocument(try s.run(["info", made[2], "--json"]))
            let created = try #require(info["created"] as? String)
            let newest = try #require(ISO8601DateFormatter().date(from: created))
            let stamp = ISO8601DateFormatter().string(from: newest.addingTimeInterval(-1))
            let forged = [dir + "/n11archive-29990101T000000Z.nu11vlt", dir + "/n11archive-29990101T000000Z-2.nu11vlt"]
            try PruneAuthenticationTests().forge(made[0], created: stamp, to: forged[0])
            try PruneAuthenticationTests().forge(made[1], created: stamp, to: forged[1])
            for path in forged { #expect(chown(path, 65534, 65534) == 0) }

            let pruned = try s.run(["prune", dir, "--keep-last", "3", "--json"])
            expectExit(pruned, 0)
            let doc = try jsonDocument(pruned)
            #expect((doc["deleted"] as? [String]) == [], "genuine archives were deleted: \(pruned)")
            #expect(Set((doc["ignored"] as? [String]) ?? []) == Set(forged), "\(pruned)")
            #expect(made.allSatisfy(exists) && forged.allSatisfy(exists))

            // As the user's own files, they claim IDs already counted (the originals are there):
            // not counted either.
            for path in forged { #expect(chown(path, geteuid(), getegid()) == 0) }
            let own = try s.run(["prune", dir, "--keep-last", "3", "--json", "--dry-run"])
            expectExit(own, 0)
            #expect(Set((try jsonDocument(own)["notOpened"] as? [String]) ?? []) == Set(forged), "\(own)")
            for path in forged { unlink(path) }

            // A byte-identical copy of an archive under another name counts once, never twice.
            let copy = dir + "/n11archive-29990101T000001Z.nu11vlt"
            try writeBytes(try readBytes(made[1]), to: copy)
            let again = try s.run(["prune", dir, "--keep-last", "3", "--json", "--dry-run"])
            expectExit(again, 0)
            #expect(((try jsonDocument(again)["notOpened"] as? [String]) ?? []).contains(copy), "\(again)")
            unlink(copy)

            // The newest archive moved (renamed) and damaged on the way: not what was written,
            // and nothing else counts as it, so it is a damaged backup of ours and prune stops.
            let moved = dir + "/n11archive-29991231T235959Z.nu11vlt"
            #expect(rename(made[2], moved) == 0)
            try flipByte(in: moved, at: Int(fileSize(moved) ?? 0) / 2)
            let stopped = try s.run(["prune", dir, "--keep-last", "1"])
            expectExit(stopped, 65)
            #expect(stopped.err.contains("29991231T235959Z"), "\(stopped)")
            #expect(exists(made[0]) && exists(made[1]) && exists(moved))
            try flipByte(in: moved, at: Int(fileSize(moved) ?? 0) / 2)
            // Sound again under its new name: counted by its SHA-256, and its new place recorded.
            let pruned2 = try s.run(["prune", dir, "--keep-last", "1", "--json"])
            expectExit(pruned2, 0)
            #expect(exists(moved) && !exists(made[0]) && !exists(made[1]), "\(pruned2)")

        }
    }

    @Test("a garbage file of another user's, named as the newest archive, is left alone and does not stop prune")
    func foreignGarbage() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let dir = s.path("backups")
            #expect(mkdir(dir, 0o1777) == 0 && chmod(dir, 0o1777) == 0)   // a sticky shared directory
            let ours = try s.datedArchives(2, in: dir, password: pw)
            let planted = dir + "/n11archive-29991231T235959Z.nu11vlt"
            try writeBytes(randomBytes(5000), to: planted)
            #expect(chown(planted, 65534, 65534) == 0)

            let pruned = try s.run(["prune", dir, "--keep-last", "1", "--password-file", pw, "--json"])
            expectExit(pruned, 0)
            #expect(pruned.err.contains("belongs to uid 65534"), "\(pruned)")
            #expect(((try jsonDocument(pruned)["ignored"] as? [String]) ?? []) == [planted])
            #expect(!exists(ours[0]) && exists(ours[1]) && exists(planted))

            // The same garbage of the user's own is the real newest backup, damaged: it stops prune.
            #expect(chown(planted, geteuid(), getegid()) == 0)
            _ = try s.datedArchives(1, in: dir, password: pw)
            expectExit(try s.run(["prune", dir, "--keep-last", "1", "--password-file", pw]), 65)
        }
    }

    @Test("init --vault into an empty directory another user made is 78 before any PIN is asked, and leaves no home")
    func initIntoForeignDirectory() throws {
        try withSandbox { s in
            let shared = s.path("shared-vault")
            #expect(mkdir(shared, 0o777) == 0 && chmod(shared, 0o777) == 0 && chown(shared, 65534, 65534) == 0)
            // --pin with no terminal would be 64 if the PIN were asked for first.
            let run = try s.run(["init", "--vault", shared, "--pin"])
            expectExit(run, 78)
            #expect(run.err.contains("belongs to uid 65534"), "\(run)")
            #expect(!exists(s.home) && listing(of: shared).isEmpty)
        }
    }

    @Test("after a disaster: the home that holds the identity counts none of the old archives (77, naming --adopt) until verify --adopt takes them back")
    func adoptAfterDisaster() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let dir = s.path("backups")
            let made = try s.recipientArchives(3, for: try s.offlinePublicKey(), in: dir)
            // The machine that wrote them is gone; the one with the identity takes over the job.
            let newHome = s.elsewhere("offline")
            let before = try s.run(["prune", dir, "--keep-last", "1"], environment: newHome)
            expectExit(before, 77)
            #expect(before.err.contains("--adopt"), "\(before)")
            #expect(made.allSatisfy(exists))
            let adopted = try s.run(["verify", "--adopt"] + made, environment: newHome)
            expectExit(adopted, 0)
            #expect(adopted.err.contains("recorded"), "\(adopted)")
            // Adopting again changes nothing: the record (and the copy it names) stays.
            let record = try readBytes(s.path("offline/written/") + (try #require(listing(of: s.path("offline/written")).first)))
            let again = try s.run(["verify", "--adopt", made[0]], environment: newHome)
            expectExit(again, 0)
            #expect(again.err.contains("has a record of archive"), "\(again)")
            #expect(try readBytes(s.path("offline/written/") + (try #require(listing(of: s.path("offline/written")).first))) == record)
            let pruned = try s.run(["prune", dir, "--keep-last", "1"], environment: newHome)
            expectExit(pruned, 0)
            #expect(!exists(made[0]) && !exists(made[1]) && exists(made[2]), "\(pruned)")
            expectExit(try s.run(["verify", "--adopt", "--as-written", made[2]], environment: newHome), 64)

        }
    }

    @Test("archives that all belong to another user (a mount that maps them, the wrong user's job) are 78, not 'nothing to prune'")
    func allForeign() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let dir = s.path("backups")
            #expect(mkdir(dir, 0o755) == 0)
            let archives = try s.datedArchives(2, in: dir, password: pw)
            for path in archives { #expect(chown(path, 65534, 65534) == 0) }
            let pruned = try s.run(["prune", dir, "--keep-last", "1", "--password-file", pw])
            expectExit(pruned, 78)
            #expect(pruned.err.contains("belong to uid 65534") && pruned.err.contains("nothing was deleted"), "\(pruned)")
            #expect(archives.allSatisfy(exists))
        }
    }

    @Test("a planted password archive does not stop the write-only machine's prune (no password, no terminal)")
    func plantedPasswordArchive() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let dir = s.path("backups")
            let made = try s.recipientArchives(2, for: try s.offlinePublicKey(), in: dir)
            let planted = dir + "/n11archive-29991231T235959Z.nu11vlt"
            expectExit(try s.run(["create", "--portable", "-o", planted, "--password-file", try s.passwordFile()] + fastKDF,
                                 environment: try stranger(s)), 0)

            let pruned = try s.run(["prune", dir, "--keep-last", "1", "--json"])
            expectExit(pruned, 0)
            #expect(((try jsonDocument(pruned)["notOpened"] as? [String]) ?? []) == [planted], "\(pruned)")
            #expect(!exists(made[0]) && exists(made[1]) && exists(planted))
        }
    }
}
