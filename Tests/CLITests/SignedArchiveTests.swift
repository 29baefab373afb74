import Foundation
import Glibc
import Testing
import N11TestSupport

/// Issue 28, signed archives (DESIGN.md §8.4): a home signs what it creates, and where a
/// signer is trusted, nothing else is read, counted or deleted. The stranger of these tests
/// holds the recipient public key and can write to the backup directory.
@Suite("signed archives: a trusted signer, and what strangers plant")
struct SignedArchiveTests {
    /// The write-only server (this sandbox's home: `init` gave it a signing key) making
    /// recipient-only archives for the laptop's identity, and the laptop trusting the
    /// server's signing key. Returns the laptop's environment and the real archives.
    struct Setup {
        let laptop: [String: String]
        let pub: String
        let signerFile: String
        let dir: String
        let real: [String]
    }

    func setUp(_ s: Sandbox, nights: Int = 3) throws -> Setup {
        _ = try s.fillVault()
        let pub = try s.offlinePublicKey()
        let laptop = s.elsewhere("offline")
        let signerFile = s.path("server-signer.pub")
        expectExit(try s.run(["key", "export-public", "--signing", "-o", signerFile]), 0)
        let trusted = try s.run(["key", "trust", signerFile], environment: laptop)
        expectExit(trusted, 0)
        // The first trusted key turns the rule on for the home's own archives too: said.
        #expect(trusted.err.contains("this home's own included") && trusted.err.contains("key trust --own"), "\(trusted)")
        let again = try s.run(["key", "trust", signerFile], environment: laptop)
        #expect(!again.err.contains("own included"), "said once, when the rule turns on: \(again)")
        let dir = s.path("backups")
        let real = try s.recipientArchives(nights, for: pub, in: dir) { if $0 > 0 { usleep(1_050_000) } }
        return Setup(laptop: laptop, pub: pub, signerFile: signerFile, dir: dir, real: real)
    }

    /// A dated archive name `seconds` after 2099-12-31T00:00:00Z: later than any real one.
    func laterName(_ dir: String, _ seconds: Int) -> String {
        dir + "/n11archive-20991231T0000\(String(format: "%02d", seconds))Z.nu11vlt"
    }

    /// The stranger's plants: (a) an archive of other content for our public key, signed by
    /// the stranger's own key, and one unsigned (format version 2); (b) a copy of our oldest
    /// archive under a newer date; (c) our newest archive with its header re-dated, and with
    /// its signature changed.
    func plant(_ s: Sandbox, _ setup: Setup) throws -> [String: String] {
        let stranger = s.elsewhere("stranger")
        expectExit(try s.run(["init"], environment: stranger), 0)
        expectExit(try s.run(["vault", "add", try s.file("stranger.jpg", randomBytes(3000))], environment: stranger), 0)
        var planted: [String: String] = [:]
        for (what, extra) in [("other content, signed by the stranger", [String]()), ("other content, unsigned", ["--format-version", "2"])] {
            let run = try s.run(["create", "--portable", "--recipient", setup.pub, "--output-dir", setup.dir, "--json"] + extra, environment: stranger)
            expectExit(run, 0)
            planted[what] = try #require(try jsonDocument(run)["archive"] as? String)
            usleep(1_050_000)
        }
        let copy = laterName(setup.dir, 1)
        try writeBytes(try readBytes(setup.real[0]), to: copy)
        planted["an old archive renamed to a newer date"] = copy

        // Under names the date rule passes (undated; the original's second with -2), so
        // only the signature check can refuse them.
        let redated = setup.dir + "/planted-redated.nu11vlt"
        try writeBytes(try readBytes(setup.real.last!), to: redated)
        try editStoredEntry(in: redated, named: "header.json") { header in
            let text = String(decoding: header, as: UTF8.self)
            let range = try! #require(text.range(of: "\"created\":\"20"))
            header = Array(text.replacingCharacters(in: range, with: "\"created\":\"21").utf8)
        }
        planted["a re-dated header"] = redated

        let last = setup.real.last!
        let stamp = String(last[last.range(of: "n11archive-")!.upperBound...].prefix(16))
        let resigned = setup.dir + "/n11archive-\(stamp)-9.nu11vlt"
        #expect(!exists(resigned))
        try writeBytes(try readBytes(setup.real.last!), to: resigned)
        try editStoredEntry(in: resigned, named: "header.sig") { $0[7] ^= 0x20 }
        planted["a changed signature"] = resigned
        return planted
    }

    @Test("a trusted signer: restore, verify and list refuse each planted archive (77, nothing written); the real ones restore")
    func readersRefusePlants() throws {
        try withSandbox { s in
            let setup = try setUp(s, nights: 2)
            let planted = try plant(s, setup)
            let reasons = ["other content, signed by the stranger": "which is not a trusted signer here",
                           "other content, unsigned": "version 2 archive, which is never signed",
                           "an old archive renamed to a newer date": "copy of another night's archive",
                           "a re-dated header": "changed after it was signed",
                           "a changed signature": "changed after it was signed"]
            for (what, path) in planted {
                let target = s.path("restored-\(what.count)")
                let restore = try s.run(["restore", path, "--vault", target], environment: setup.laptop)
                expectExit(restore, 77)
                #expect(restore.err.contains("is refused") && restore.err.contains(reasons[what]!), "\(what): \(restore)")
                #expect(!exists(target), "\(what): the refused restore left \(target)")
                expectExit(try s.run(["verify", path], environment: setup.laptop), 77)
                expectExit(try s.run(["list", path], environment: setup.laptop), 77)
            }
            let target = s.path("restored")
            expectExit(try s.run(["restore", setup.real.last!, "--vault", target], environment: setup.laptop), 0)
            // --no-signer-check reads the stranger's archive (it opens with our identity).
            expectExit(try s.run(["verify", planted["other content, signed by the stranger"]!, "--no-signer-check"], environment: setup.laptop), 0)
        }
    }

    @Test("prune with a trusted signer counts only the real nights (no secret needed) and never deletes a planted file; archives marks the plants")
    func pruneAndArchivesIgnorePlants() throws {
        try withSandbox { s in
            let setup = try setUp(s, nights: 3)
            let planted = try plant(s, setup)
            let listed = try s.run(["archives", setup.dir, "--json"], environment: setup.laptop)
            expectExit(listed, 0)
            let entries = try #require(try jsonDocument(listed)["archives"] as? [[String: Any]])
            for entry in entries {
                let path = try #require(entry["archive"] as? String)
                if planted.values.contains(path) {
                    #expect(entry["notTrusted"] is String, "\(path) is not marked: \(entry)")
                } else {
                    #expect(entry["notTrusted"] == nil && entry["signature"] as? String == "verified", "\(entry)")
                }
            }
            #expect(entries.count == setup.real.count + planted.count)
            let reasons = Dictionary(uniqueKeysWithValues: entries.map { ($0["archive"] as? String ?? "", $0["notTrusted"] as? String ?? "") })
            #expect(reasons[planted["a changed signature"]!]?.contains("changed after it was signed") == true, "\(reasons)")
            #expect(reasons[planted["an old archive renamed to a newer date"]!]?.contains("copy of another night") == true, "\(reasons)")
            let table = try s.run(["archives", setup.dir], environment: setup.laptop)
            #expect(table.out.contains("TRUSTED") && table.err.contains("is not trusted: it is signed by key"), "\(table)")

            // Three real nights kept by --keep-last 3: nothing deleted, the plants not counted.
            let keepAll = try s.run(["prune", setup.dir, "--keep-last", "3", "--json"], environment: setup.laptop)
            expectExit(keepAll, 0)
            let kept = try jsonDocument(keepAll)
            #expect((kept["deleted"] as? [String]) == [], "\(keepAll)")
            // (prune considers dated names only: the undated plant is not even looked at.)
            #expect(Set((kept["notOpened"] as? [String]) ?? []) == Set(planted.values.filter { $0.contains("/n11archive-") }), "\(keepAll)")
            // --keep-last 2 deletes exactly the oldest real night, and no planted file.
            let keepTwo = try s.run(["prune", setup.dir, "--keep-last", "2", "--json"], environment: setup.laptop)
            expectExit(keepTwo, 0)
            #expect((try jsonDocument(keepTwo)["deleted"] as? [String]) == [setup.real[0]], "\(keepTwo)")
            #expect(planted.values.allSatisfy(exists) && setup.real.dropFirst().allSatisfy(exists))
            // The write-only server itself counts its signed archives the same way.
            expectExit(try s.run(["key", "trust", "--own"]), 0)
            let server = try s.run(["prune", setup.dir, "--keep-last", "1", "--dry-run", "--json"])
            expectExit(server, 0)
            #expect((try jsonDocument(server)["deleted"] as? [String]) == [setup.real[1]], "\(server)")
        }
    }

    @Test("the signer is checked before any Argon2id: an untrusted archive with a huge password cost is refused as untrusted, and no password is read")
    func signerBeforeKDF() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            expectExit(try s.run(["key", "trust", "--own"]), 0)
            let stranger = s.elsewhere("stranger")
            expectExit(try s.run(["init"], environment: stranger), 0)
            expectExit(try s.run(["vault", "add", try s.file("s.jpg", randomBytes(100))], environment: stranger), 0)
            let pw = try s.passwordFile()
            let costly = s.path("costly.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", costly, "--password-file", pw, "--kdf-ops", "1", "--kdf-memory", "1024"],
                                 environment: stranger), 0)
            // The password descriptor is not open: reading it would fail with another error.
            let restore = try s.run(["restore", costly, "--vault", s.path("v"), "--password-fd", "9"])
            expectExit(restore, 77)
            #expect(restore.err.contains("not a trusted signer"), "\(restore)")
            // Without the rule, the KDF ceiling is what stops it (64).
            expectExit(try s.run(["restore", costly, "--vault", s.path("v"), "--password-fd", "9", "--no-signer-check"]), 64)
        }
    }

    @Test("--signed-by trusts a key for one command; a P-256 key or a private key given there is refused with the reason")
    func signedByOption() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            let created = try s.run(["create", "--portable", "-o", archive, "--password-file", pw, "--json"] + fastKDF)
            expectExit(created, 0)
            let fingerprint = try #require(try jsonDocument(created)["signedBy"] as? String)
            let info = try s.run(["info", archive])
            #expect(info.out.contains("signed:") && !info.out.contains("signed:   no"), "\(info)")
            let signer = s.path("signer.pub")
            expectExit(try s.run(["key", "export-public", "--signing", "-o", signer]), 0)
            // OpenSSL reads the exported key as Ed25519.
            let openssl = try runShell("openssl pkey -pubin -in '\(signer)' -noout -text 2>&1")
            #expect(openssl.status == 0 && openssl.output.contains("ED25519"), "\(openssl.output)")
            expectExit(try s.run(["verify", archive, "--password-file", pw, "--signed-by", signer]), 0)
            #expect(try s.run(["key", "list"]).out.contains("signing  \(fingerprint)"))

            let other = s.elsewhere("other")
            expectExit(try s.run(["init"], environment: other), 0)
            let otherSigner = s.path("other-signer.pub")
            expectExit(try s.run(["key", "export-public", "--signing", "-o", otherSigner], environment: other), 0)
            let refused = try s.run(["verify", archive, "--password-file", pw, "--signed-by", otherSigner])
            expectExit(refused, 77)
            #expect(refused.err.contains("signed by key \(fingerprint)"), "\(refused)")

            expectExit(try s.run(["key", "generate"]), 0)
            let recipient = try s.file("recipient.pub", Array(try s.run(["key", "export-public"]).stdout))
            let wrongKind = try s.run(["verify", archive, "--password-file", pw, "--signed-by", recipient])
            expectExit(wrongKind, 64)
            #expect(wrongKind.err.contains("P-256"), "\(wrongKind)")
            expectExit(try s.run(["verify", archive, "--signed-by", signer, "--no-signer-check"]), 64)
        }
    }

    @Test("key backup carries the signing key and the trusted signers: a rebuilt machine signs with the same key and trusts the same signer")
    func backupCarriesSigning() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            expectExit(try s.run(["key", "trust", "--own"]), 0)
            let before = try s.run(["key", "list"]).out
            let passphrase = try s.passphraseFile()
            let backup = s.path("keys.n11backup")
            expectExit(try s.run(["key", "backup", "-o", backup, "--passphrase-file", passphrase]), 0)
            let pw = try s.passwordFile()
            let old = s.path("old.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", old, "--password-file", pw] + fastKDF), 0)

            let rebuilt = s.elsewhere("rebuilt")
            let restored = try s.run(["key", "restore", backup, "--passphrase-file", passphrase], environment: rebuilt)
            expectExit(restored, 0)
            #expect(restored.out.contains("the signing key, 1 trusted signer(s)"), "\(restored)")
            #expect(try s.run(["key", "list"], environment: rebuilt).out == before)
            // The old archive restores on the rebuilt machine under the same trust rule.
            expectExit(try s.run(["restore", old, "--vault", s.path("v"), "--password-file", pw], environment: rebuilt), 0)
            // And a stranger's archive is still refused there.
            let stranger = s.elsewhere("stranger")
            expectExit(try s.run(["init"], environment: stranger), 0)
            expectExit(try s.run(["vault", "add", try s.file("s.jpg", randomBytes(100))], environment: stranger), 0)
            let theirs = s.path("theirs.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", theirs, "--password-file", pw] + fastKDF, environment: stranger), 0)
            expectExit(try s.run(["restore", theirs, "--vault", s.path("w"), "--password-file", pw], environment: rebuilt), 77)
            // Untrusting the last signer turns the rule off.
            let fingerprint = try #require(before.split(separator: "\n").first { $0.hasPrefix("trusted") }?.split(separator: " ").last)
            expectExit(try s.run(["key", "untrust", String(fingerprint.prefix(6))], environment: rebuilt), 0)
            expectExit(try s.run(["restore", theirs, "--vault", s.path("w"), "--password-file", pw], environment: rebuilt), 0)
        }
    }

    @Test("rekey signs a signed archive again with the home's key; another home's rekey refuses unless --drop-signature")
    func rekeySigns() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            expectExit(try s.run(["key", "trust", "--own"]), 0)
            let pw = try s.passwordFile()
            let newPW = try s.passwordFile("another long enough password\n", name: "new")
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            let rekeyed = try s.run(["rekey", archive, "--password-file", pw, "--add-password", "--new-password-file", newPW] + fastKDF)
            expectExit(rekeyed, 0)
            #expect(rekeyed.out.contains("signed again by"), "\(rekeyed)")
            expectExit(try s.run(["verify", archive, "--password-file", newPW]), 0)

            let other = s.elsewhere("other")
            expectExit(try s.run(["init"], environment: other), 0)
            let refused = try s.run(["rekey", archive, "--password-file", pw, "--remove-passwords", "--add-password", "--new-password-file", newPW] + fastKDF,
                                    environment: other)
            expectExit(refused, 64)
            #expect(refused.err.contains("--drop-signature"), "\(refused)")
            let dropped = try s.run(["rekey", archive, "--password-file", pw, "--add-password", "--new-password-file", newPW, "--drop-signature"] + fastKDF,
                                    environment: other)
            expectExit(dropped, 0)
            #expect(dropped.out.contains("no longer signed"), "\(dropped)")
            // Now unsigned: this home, which trusts its own key, refuses it.
            expectExit(try s.run(["verify", archive, "--password-file", pw]), 77)
        }
    }
}
