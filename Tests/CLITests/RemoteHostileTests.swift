import Foundation
import Glibc
import Testing
import N11System
import N11TestSupport

/// What a remote lets strangers do, and what an interrupted upload leaves (issue 25 findings
/// 2, 6, 8, 9, 10, and the spool advice), against the loopback servers of `RemoteWorld`.
@Suite("n11archive CLI: remotes under interruption and planted objects", .serialized,
       .enabled(if: rcloneAvailable, "rclone is not installed (Scripts/setup installs it)"))
struct RemoteHostileTests {
    /// A vault with one 48 MiB photo: an upload that takes a moment.
    func bigVault(_ s: Sandbox) throws {
        try s.initialize()
        let block = randomBytes(1 << 20)
        var content: [UInt8] = []
        content.reserveCapacity(48 << 20)
        for index in 0..<48 { content.append(contentsOf: block); content[content.count - 1] = UInt8(index) }
        let big = try s.file("big.jpg", content)
        expectExit(try s.run(["vault", "add", big]), 0)
        unlink(big)
    }

    /// rclone processes still working on `name` (an upload the interrupted command started).
    func rcloneRunning(on name: String) -> Bool {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).contains { pid in
            guard let bytes = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            let line = String(decoding: bytes, as: UTF8.self)
            return line.contains("rclone") && line.contains(name) && !line.contains("serve")
        }
    }

    /// On sftp (rclone's backend takes a stream) the upload runs while the archive is being
    /// written, so the signal lands in the middle of both; on webdav, in the upload of the
    /// complete archive.
    @Test("Ctrl-C or SIGTERM during an upload: the spooled archive, the temp object, the lock object and the rclone child go; the same command then works",
          arguments: [SIGTERM, SIGINT], ["dav", "sf"])
    func interruptedUpload(signal: Int32, remote: String) throws {
        try withSandbox { s in
            try bigVault(s)
            let pw = try s.passwordFile()
            let world = try RemoteWorld(s)
            let args = ["create", "--portable", "-o", "\(remote):backups/x.nu11vlt", "--password-file", pw] + fastKDF
            let (status, sawWork) = try interrupt(args, home: s.home, environment: world.environment, signal: signal) {
                listing(of: world.data + "/backups").contains { $0.hasPrefix(".n11tmp-") }
            }
            #expect(sawWork, "the upload never started")
            #expect(status == 128 + signal)
            usleep(500_000)
            #expect(!rcloneRunning(on: "x.nu11vlt"), "rclone kept uploading after we were stopped")
            #expect(listing(of: s.home + "/spool").isEmpty, "the spooled archive stayed: \(listing(of: s.home + "/spool"))")
            let left = listing(of: world.data + "/backups")
            #expect(left.isEmpty, "the remote keeps \(left)")

            let again = try world.run(["create", "--portable", "-o", "\(remote):backups/x.nu11vlt", "--password-file", pw] + fastKDF)
            expectExit(again, 0)
            #expect(world.stored == ["x.nu11vlt"])
        }
    }

    @Test("prune REMOTE:DIR --dry-run changes nothing: temp objects of failed uploads are counted, not deleted")
    func dryRunKeepsTemps() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let world = try RemoteWorld(s)
            for _ in 0..<2 {
                expectExit(try world.run(["create", "--portable", "--output-dir", "dav:backups", "--password-file", pw] + fastKDF), 0)
            }
            let temp = world.data + "/backups/.n11tmp-n11archive-20260101T000000Z.nu11vlt.abcdef"
            try writeBytes(randomBytes(100), to: temp)
            let before = listing(of: world.data + "/backups").filter { !$0.hasPrefix(".n11archive.lock") }
            let dry = try world.run(["prune", "dav:backups", "--keep-last", "1", "--password-file", pw, "--dry-run"])
            expectExit(dry, 0)
            #expect(dry.err.contains("would remove 1 temp object"), "\(dry)")
            #expect(world.stored == before, "a dry run changed the remote")
            expectExit(try world.run(["prune", "dav:backups", "--keep-last", "1", "--password-file", pw]), 0)
            #expect(!exists(temp))
        }
    }

    @Test("a lock object dated a year ahead does not block create or prune: it is dead")
    func futureLock() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let world = try RemoteWorld(s)
            let lock = world.data + "/backups/.n11archive.lock.exclusive.other-host.4242.abcdef"
            try writeBytes(Array("other-host pid 4242 exclusive\n".utf8), to: lock)
            try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(365 * 86400)], ofItemAtPath: lock)
            expectExit(try world.run(["create", "--portable", "--output-dir", "dav:backups", "--password-file", pw] + fastKDF), 0)
            #expect(!exists(lock))
        }
    }

    @Test("prune REMOTE:DIR judges an unrecorded object by its first 64 KiB: planted garbage and stranger's recipient archives are never downloaded or counted")
    func plantedObjects() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let world = try RemoteWorld(s)
            expectExit(try s.run(["key", "generate"]), 0)
            let pub = try s.file("mine.pub", Array(try s.run(["key", "export-public"]).stdout))
            var ours: [String] = []
            for _ in 0..<2 {
                let made = try world.run(["create", "--portable", "--output-dir", "dav:backups", "--password-file", pw, "--json"] + fastKDF)
                expectExit(made, 0)
                ours.append(try #require(try jsonDocument(made)["archive"] as? String))
            }
            // A stranger's archives made with our public key, newer than ours, and 2 MiB of garbage.
            let stranger = s.path("stranger")
            var env = world.environment
            env["N11_HOME"] = stranger
            expectExit(try s.run(["init"], environment: env), 0)
            expectExit(try s.run(["vault", "add", try s.file("s.jpg", randomBytes(5000))], environment: env), 0)
            for _ in 0..<2 {
                expectExit(try s.run(["create", "--portable", "--recipient", pub, "--output-dir", "dav:backups"], environment: env), 0)
            }
            let garbage = "n11archive-29991231T235959Z.nu11vlt"
            try writeBytes(randomBytes(2 << 20), to: world.data + "/backups/" + garbage)

            // A wrapper that records each rclone call.
            let log = s.path("rclone-calls.log")
            let wrapper = try s.file("rclone-wrapper", Array("#!/bin/sh\nprintf '%s\\n' \"$*\" >> '\(log)'\nexec rclone \"$@\"\n".utf8))
            chmod(wrapper, 0o755)
            var mine = world.environment
            mine["N11_RCLONE"] = wrapper
            let pruned = try s.run(["prune", "dav:backups", "--keep-last", "2", "--password-file", pw, "--json"], environment: mine)
            expectExit(pruned, 0)
            let doc = try jsonDocument(pruned)
            #expect((doc["deleted"] as? [String]) == [], "our archives were pushed out: \(pruned)")
            #expect((doc["notOpened"] as? [String])?.count == 2, "\(pruned)")
            #expect((doc["ignored"] as? [String]) == ["dav:backups/" + garbage], "\(pruned)")
            let calls = String(decoding: try readBytes(log), as: UTF8.self)
            #expect(!calls.split(separator: "\n").contains { $0.hasPrefix("copyto") && $0.contains(garbage) },
                    "the garbage was downloaded:\n\(calls)")
            #expect(world.stored.count == 5)
        }
    }

    @Test("prune REMOTE:DIR: when the policy keeps every archive (any rules), nothing is opened and no secret is needed")
    func policyShortcut() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let world = try RemoteWorld(s)
            // Another home's password archives: this home has no record of them.
            var env = world.environment
            env["N11_HOME"] = s.path("other")
            expectExit(try s.run(["init"], environment: env), 0)
            expectExit(try s.run(["vault", "add", try s.file("o.jpg", randomBytes(3000))], environment: env), 0)
            let pw = try s.passwordFile()
            for _ in 0..<3 {
                expectExit(try s.run(["create", "--portable", "--output-dir", "dav:backups", "--password-file", pw] + fastKDF, environment: env), 0)
            }
            let pruned = try world.run(["prune", "dav:backups", "--keep-last", "3", "--keep-weekly", "4", "--json"])
            expectExit(pruned, 0)
            #expect((try jsonDocument(pruned)["kept"] as? [[String: Any]])?.count == 3, "\(pruned)")
            #expect(!pruned.err.contains("not counted"), "archives were opened: \(pruned)")
        }
    }

    @Test("--spool /tmp is refused with the advice to choose a private directory, never to chmod it (78)")
    func sharedSpool() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let run = try s.run(["create", "--portable", "-o", "nas:x.nu11vlt", "--spool", "/tmp", "--password-file", try s.passwordFile()] + fastKDF)
            expectExit(run, 78)
            #expect(run.err.contains("choose a private directory") && !run.err.contains("chmod") && !run.err.contains("chown"), "\(run)")
        }
    }
}
