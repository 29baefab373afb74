import Foundation
import Glibc
import Testing
import N11TestSupport

// `vault rotate-keys` end to end: what it prints, that every item and older secure archives
// survive it, --forget-retired, and the ways it refuses.

@Suite("n11archive CLI: vault rotate-keys")
struct RotateKeysCLITests {
    /// `key list --compartment-keys` as compartment → [(state, id)].
    static func compartmentKeys(_ s: Sandbox, _ extra: [String] = []) throws -> [String: [(String, String)]] {
        let listed = try s.run(["key", "list", "--compartment-keys"] + extra)
        expectExit(listed, 0)
        var keys: [String: [(String, String)]] = [:]
        for line in listed.out.split(separator: "\n") {
            let words = line.split(separator: " ").map(String.init)
            #expect(words.count == 3, "\(line)")
            guard words.count == 3 else { continue }
            keys[words[0], default: []].append((words[1], words[2]))
        }
        return keys
    }

    static func current(_ keys: [String: [(String, String)]]) -> [String: String] {
        keys.compactMapValues { $0.first { $0.0 == "current" }?.1 }
    }

    /// Every live item's bytes by name (`vault cat`).
    static func contents(_ s: Sandbox, _ extra: [String] = []) throws -> [String: [UInt8]] {
        let listed = try s.run(["vault", "list", "--json"] + extra)
        expectExit(listed, 0)
        let items = try #require((try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [String: Any])?["items"] as? [[String: Any]])
        var out: [String: [UInt8]] = [:]
        for item in items {
            let id = try #require(item["id"] as? String), name = try #require(item["name"] as? String)
            let file = s.path("cat-\(id)")
            expectExit(try s.run(["vault", "cat", id, "-o", file] + extra), 0)
            out[name] = try readBytes(file)
            unlink(file)
        }
        return out
    }

    @Test("rotates every compartment: items intact, the old keys retired and named, older secure archives restore; --forget-retired makes them 77")
    func rotation() throws {
        try withSandbox { s in
            let originals = try s.fillVault()
            let pw = try s.passwordFile()
            let secure = s.path("before.nu11vlt"), portable = s.path("before-portable.nu11vlt")
            expectExit(try s.run(["create", "--secure", "-o", secure]), 0)
            expectExit(try s.run(["create", "--portable", "-o", portable, "--password-file", pw] + fastKDF), 0)
            let before = Self.current(try Self.compartmentKeys(s))
            #expect(before.count == 3)

            let rotated = try s.run(["vault", "rotate-keys"])
            expectExit(rotated, 0)
            #expect(rotated.out.contains("rotated the vault, fade, backup key(s)") && rotated.out.contains("5 item(s)"), "\(rotated)")
            #expect(rotated.err.contains("3 retired key(s) kept") && rotated.err.contains("--forget-retired"), "\(rotated)")
            let keys = try Self.compartmentKeys(s)
            for (compartment, old) in before {
                let mine = keys[compartment] ?? []
                #expect(mine.count == 2 && mine[0].0 == "current" && mine[0].1 != old && mine[1] == ("retired", old), "\(compartment): \(mine)")
            }
            #expect(try Self.contents(s) == originals)
            expectExit(try s.run(["vault", "verify"]), 0)

            // The secure archive from before: verifies, and restores an item removed since.
            expectExit(try s.run(["verify", secure]), 0)
            let listed = try s.run(["vault", "list", "--json"])
            let firstID = try #require(((try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [String: Any])?["items"] as? [[String: Any]])?.first?["id"] as? String)
            expectExit(try s.run(["vault", "rm", firstID]), 0)
            let restored = try s.run(["restore", secure])
            expectExit(restored, 0)
            #expect(restored.out.contains("restored 1 item(s)"), "\(restored)")
            #expect(try Self.contents(s) == originals)

            // One compartment, as JSON.
            let backupOnly = try s.run(["vault", "rotate-keys", "--compartment", "backup", "--json"])
            expectExit(backupOnly, 0)
            let document = try #require(try JSONSerialization.jsonObject(with: Data(backupOnly.stdout)) as? [String: Any])
            #expect(document["outcome"] as? String == "ok" && document["compartments"] as? [String] == ["backup"])
            #expect((document["newKeyIds"] as? [String: String])?.keys.sorted() == ["backup"])
            #expect((document["retiredKeys"] as? [String: [String]])?["backup"]?.count == 2)
            #expect(Self.current(try Self.compartmentKeys(s))["vault"] == Self.current(keys)["vault"], "vault key unchanged")

            // Forgetting: the secure archive from before is refused with that reason; the
            // portable one never needed these keys.
            let forget = try s.run(["vault", "rotate-keys", "--forget-retired", "--json"])
            expectExit(forget, 0)
            let forgot = try #require(try JSONSerialization.jsonObject(with: Data(forget.stdout)) as? [String: Any])
            #expect(forgot["forgottenKeys"] as? Int == 7, "\(forget)")
            #expect(try Self.compartmentKeys(s).values.allSatisfy { $0.filter { $0.0 == "retired" }.isEmpty })
            let refused = try s.run(["verify", secure])
            expectExit(refused, 77)
            #expect(refused.err.contains("forgotten") && refused.err.contains("key backup"), "\(refused)")
            expectExit(try s.run(["verify", portable, "--password-file", pw]), 0)
            #expect(try Self.contents(s) == originals)
        }
    }

    @Test("a damaged item stops it (65, named, nothing changed); a PIN-protected key store stays sealed; a bad compartment is 64")
    func refusals() throws {
        try withSandbox { s in
            let pin = try s.file("pin", Array("24681357\n".utf8))
            chmod(pin, 0o600)
            expectExit(try s.run(["init", "--pin", "--pin-file", pin]), 0)
            expectExit(try s.run(["vault", "add", try s.file("a.jpg", randomBytes(5000)), try s.file("b.jpg", randomBytes(70_000))],
                                 environment: ["N11_PIN_FILE": pin]), 0)
            let withPIN = ["--pin-file", pin]
            let before = Self.current(try Self.compartmentKeys(s, withPIN))

            // A byte flipped in one item's file.
            let photos = s.vault + "/Photos"
            let victim = try #require(try FileManager.default.contentsOfDirectory(atPath: photos).sorted().first)
            var bytes = try readBytes(photos + "/" + victim)
            bytes[20] ^= 1
            try writeBytes(bytes, to: photos + "/" + victim)
            let damaged = try s.run(["vault", "rotate-keys"] + withPIN)
            expectExit(damaged, 65)
            #expect(damaged.err.contains(String(victim.prefix(36))), "\(damaged)")
            #expect(Self.current(try Self.compartmentKeys(s, withPIN)) == before)
            #expect(try readBytes(photos + "/" + victim) == bytes, "the damaged file is left as it was")
            bytes[20] ^= 1
            try writeBytes(bytes, to: photos + "/" + victim)

            let originals = try Self.contents(s, withPIN)
            expectExit(try s.run(["vault", "rotate-keys"] + withPIN), 0)
            #expect(Self.current(try Self.compartmentKeys(s, withPIN)) != before)
            #expect(try Self.contents(s, withPIN) == originals)
            expectExit(try s.run(["vault", "list"]), 77)   // still sealed under the PIN

            let bad = try s.run(["vault", "rotate-keys", "--compartment", "photos"] + withPIN)
            expectExit(bad, 64)
        }
    }
}
