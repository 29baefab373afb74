import Foundation
import Glibc
import Testing
import N11TestSupport

/// prune decides on archive headers, and a header is not authenticated until its key is
/// unwrapped: only archives that open with this prune's password or key store may count
/// towards the policy or be deleted.
@Suite("prune counts and deletes only archives that open with its key")
struct PruneAuthenticationTests {
    /// A copy of `archive` whose header says it was created at `created` (nothing else
    /// changed): it reads as an archive, but its key wrap no longer authenticates.
    func forge(_ archive: String, created: String, to path: String) throws {
        let script = """
        import sys, zipfile, re
        source, created, target = sys.argv[1:4]
        with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as zout:
            for info in zin.infolist():
                data = zin.read(info)
                if info.filename == "header.sig":
                    continue
                if info.filename == "header.json":
                    data = re.sub(rb'"created":"[^"]*"', b'"created":"' + created.encode() + b'"', data)
                    data = re.sub(rb',"signer":"[0-9a-f]{64}"', b'', data)
                zout.writestr(zipfile.ZipInfo(info.filename, date_time=info.date_time), data)
        """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = ["-c", script, archive, created, path]
        try p.run()
        p.waitUntilExit()
        try #require(p.terminationStatus == 0, "forging failed")
    }

    func created(_ s: Sandbox, _ archive: String) throws -> Date {
        let doc = try jsonDocument(try s.run(["info", archive, "--json"]))
        let text = try #require(doc["created"] as? String)
        return try #require(ISO8601DateFormatter().date(from: text))
    }

    @Test("two homes share a backup directory: prune with one password never counts or deletes the other's archives")
    func twoHomes() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pwA = try s.passwordFile()
            let pwB = try s.passwordFile("another home's password entirely\n", name: "passwordB")
            let homeB = s.path("homeB")
            expectExit(try s.run(["init"], environment: ["N11_HOME": homeB]), 0)
            expectExit(try s.run(["vault", "add", try s.file("b.jpg", randomBytes(2000))], environment: ["N11_HOME": homeB]), 0)
            let dir = s.path("backups")
            #expect(mkdir(dir, 0o700) == 0)
            var mine: [String] = [], theirs: [String] = []
            // Interleaved, home A's last: its newest archive verifies, as it did in the review.
            for _ in 0..<3 {
                let run = try s.run(["create", "--portable", "--output-dir", dir, "--password-file", pwB, "--json"] + fastKDF,
                                    environment: ["N11_HOME": homeB])
                expectExit(run, 0)
                theirs.append(try #require(try jsonDocument(run)["archive"] as? String))
                mine += try s.datedArchives(1, in: dir, password: pwA)
            }

            let pruned = try s.run(["prune", dir, "--keep-last", "1", "--password-file", pwA, "--json"])
            expectExit(pruned, 0)
            let doc = try jsonDocument(pruned)
            #expect(Set((doc["deleted"] as? [String]) ?? []) == Set(mine[0..<2]), "\(pruned)")
            #expect(Set((doc["notOpened"] as? [String]) ?? []) == Set(theirs), "\(pruned)")
            #expect(exists(mine[2]) && !exists(mine[0]) && !exists(mine[1]))
            for archive in theirs {
                expectExit(try s.run(["verify", archive, "--password-file", pwB], environment: ["N11_HOME": homeB]), 0)
            }

            // A home that wrote none of them, with a password that opens none: 77, nothing
            // deleted. (Home A's own kept archive counts by its record, without the password.)
            let before = listing(of: dir)
            let wrong = try s.run(["prune", dir, "--keep-last", "1", "--password-file", try s.passwordFile("nope\n", name: "wrong")],
                                  environment: s.elsewhere("homeC"))
            expectExit(wrong, 77)
            #expect(listing(of: dir) == before)
        }
    }

    @Test("forged archives dated between real ones neither fill the keep slots nor get deleted")
    func forgedHeaders() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let dir = s.path("backups")
            #expect(mkdir(dir, 0o700) == 0)
            var real = try s.datedArchives(2, in: dir, password: pw)
            usleep(2_100_000)   // a gap of whole seconds for the forgeries' dates
            real += try s.datedArchives(1, in: dir, password: pw)
            // Dated one second after the second real archive: after it, before the newest.
            let between = try created(s, real[1]).addingTimeInterval(1)
            let stamp = ISO8601DateFormatter().string(from: between)
            let compact = stamp.replacingOccurrences(of: "-", with: "").replacingOccurrences(of: ":", with: "")
            let forged = [dir + "/n11archive-\(compact).nu11vlt", dir + "/n11archive-\(compact)-2.nu11vlt"]
            for path in forged { try forge(real[2], created: stamp, to: path) }
            #expect(try created(s, forged[0]) == between, "the forgery reads as an archive of that time")

            let pruned = try s.run(["prune", dir, "--keep-last", "3", "--password-file", pw, "--json"])
            expectExit(pruned, 0)
            let doc = try jsonDocument(pruned)
            #expect((doc["deleted"] as? [String]) == [], "real archives were pushed out: \(pruned)")
            #expect(Set((doc["notOpened"] as? [String]) ?? []) == Set(forged))
            #expect(real.allSatisfy(exists) && forged.allSatisfy(exists))
            #expect(pruned.err.contains("is not counted as this home's"), "\(pruned)")
        }
    }
}
