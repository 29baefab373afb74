import Foundation
import Glibc
import Testing
import N11TestSupport

// Public-key archives through the binary: `key generate/export-public/export-private/
// import/list`, `create --recipient`, and restoring with the key store's identity or
// `--identity FILE` on another machine.

extension Sandbox {
    /// A second home on "another machine": its own N11_HOME under the sandbox.
    func elsewhere(_ name: String) -> [String: String] { ["N11_HOME": path(name)] }

    /// The public key of an identity kept in another home ("offline"), in `backup.pub`: what
    /// the README's write-only nightly job is given.
    func offlinePublicKey() throws -> String {
        expectExit(try run(["init"], environment: elsewhere("offline")), 0)
        expectExit(try run(["key", "generate"], environment: elsewhere("offline")), 0)
        return try file("backup.pub", Array(try run(["key", "export-public"], environment: elsewhere("offline")).stdout))
    }

    /// Makes `count` dated recipient-only archives for `pub` in `dir` (made 0700 if missing);
    /// returns their paths, oldest first. `pause` runs before each one (for distinct seconds).
    func recipientArchives(_ count: Int, for pub: String, in dir: String, pause: (Int) -> Void = { _ in }) throws -> [String] {
        if !exists(dir) { mkdir(dir, 0o700) }
        var made: [String] = []
        for index in 0..<count {
            pause(index)
            let run = try run(["create", "--portable", "--recipient", pub, "--output-dir", dir, "--json"])
            expectExit(run, 0)
            made.append(try #require(try jsonDocument(run)["archive"] as? String))
        }
        return made
    }

    func passphraseFile(_ text: String = "a long passphrase") throws -> String {
        let p = path("passphrase-\(text.count)")
        try writeBytes(Array((text + "\n").utf8), to: p)
        chmod(p, 0o600)
        return p
    }
}

@Suite("n11archive CLI: P-256 identities and recipient archives")
struct KeyCLITests {
    @Test("a write-only nightly: create --recipient asks nothing; the archive restores elsewhere with --identity and with nothing else")
    func writeOnlyBackup() throws {
        try withSandbox { s in
            let originals = try s.fillVault()
            expectExit(try s.run(["key", "generate"]), 0)
            let pub = s.path("backup.pub")
            let exported = try s.run(["key", "export-public", "-o", pub])
            expectExit(exported, 0)
            let pem = String(decoding: try readBytes(pub), as: UTF8.self)
            // FileLock's form: PUBLIC KEY around the raw 65-byte point (88 base64 characters).
            let body = pem.split(separator: "\n").dropFirst().dropLast().joined()
            #expect(pem.hasPrefix("-----BEGIN PUBLIC KEY-----\n") && pem.hasSuffix("-----END PUBLIC KEY-----\n"))
            #expect(Data(base64Encoded: body)?.count == 65 && Data(base64Encoded: body)?.first == 0x04)
            #expect(try s.run(["key", "export-public"]).out == pem, "stdout gets the same PEM")

            let pp = try s.passphraseFile()
            let key = s.path("backup.key")
            expectExit(try s.run(["key", "export-private", "-o", key, "--passphrase-file", pp]), 0)
            #expect(fileMode(key) == 0o600)
            // Never replaced.
            let again = try s.run(["key", "export-private", "-o", key, "--passphrase-file", pp])
            expectExit(again, 73)

            // Cron: no terminal, no password file: nothing is asked and the archive is made.
            let archive = s.path("nightly.nu11vlt")
            let created = try s.run(["create", "--portable", "--recipient", pub, "-o", archive])
            expectExit(created, 0)
            #expect(created.out.contains("for 1 recipient(s)"), "\(created)")
            let info = try s.run(["info", archive, "--json"])
            let slots = try #require((try JSONSerialization.jsonObject(with: Data(info.stdout)) as? [String: Any])?["slots"] as? [[String: Any]])
            #expect(slots.map { $0["type"] as? String } == ["p256"])

            // This machine holds the identity: verify opens it without any secret.
            expectExit(try s.run(["verify", archive]), 0)

            // Another machine with nothing: refused, saying what would open it.
            let bare = try s.run(["restore", archive], environment: s.elsewhere("bare"))
            expectExit(bare, 77)
            #expect(bare.err.contains("1 recipient slot(s)") && bare.err.contains("--identity"), "\(bare)")
            #expect(!FileManager.default.fileExists(atPath: s.path("bare/keystore.n11keys")), "a refused restore leaves no key store")

            // With the private key file and its passphrase: everything comes back.
            let restored = try s.run(["restore", archive, "--identity", key, "--passphrase-file", pp], environment: s.elsewhere("new"))
            expectExit(restored, 0)
            let export = s.path("exported")
            expectExit(try s.run(["restore", archive, "--identity", key, "--passphrase-file", pp, "--export", export],
                                 environment: s.elsewhere("new")), 0)
            let listed = try s.run(["list", archive, "--json", "--identity", key, "--passphrase-file", pp], environment: s.elsewhere("new"))
            let items = try #require((try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [String: Any])?["items"] as? [[String: Any]])
            #expect(items.count == originals.count)
            for item in items {
                let name = try #require(item["name"] as? String)
                let folder = name.hasSuffix(".txt") ? "Notes" : "Photos"
                #expect(try readBytes("\(export)/\(folder)/\(name)") == originals[name], "\(name)")
            }
            // A wrong passphrase is refused as such.
            let wrong = try s.run(["verify", archive, "--identity", key, "--passphrase-file", try s.passphraseFile("not the passphrase")],
                                  environment: s.elsewhere("new"))
            expectExit(wrong, 77)
            #expect(wrong.err.contains("wrong passphrase"), "\(wrong)")
            // The public key given where the private one belongs, and the other way round.
            let swapped = try s.run(["verify", archive, "--identity", pub], environment: s.elsewhere("new"))
            expectExit(swapped, 64)
            #expect(swapped.err.contains("holds a public key"), "\(swapped)")
            let leaked = try s.run(["create", "--portable", "--recipient", key, "-o", s.path("never.nu11vlt")])
            expectExit(leaked, 64)
            #expect(leaked.err.contains("holds a private key"), "\(leaked)")

            // key import puts it in the new machine's key store: then no flag is needed.
            expectExit(try s.run(["key", "import", key, "--passphrase-file", pp], environment: s.elsewhere("new")), 0)
            expectExit(try s.run(["verify", archive], environment: s.elsewhere("new")), 0)
            let listedKeys = try s.run(["key", "list"], environment: s.elsewhere("new"))
            // The identity's line; each home has its own signing key below it.
            let identityLine = { (run: RunResult) in run.out.split(separator: "\n").first.map(String.init) ?? "" }
            #expect(identityLine(listedKeys) == identityLine(try s.run(["key", "list"])) && identityLine(listedKeys).count == 16, "\(listedKeys)")
        }
    }

    @Test("recipients plus a password file: either opens; a standard SPKI key and a recipients file work too")
    func mixedAndForms() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            expectExit(try s.run(["key", "generate"]), 0)
            let spki = s.path("spki.pem")
            expectExit(try s.run(["key", "export-public", "--standard", "-o", spki]), 0)
            // What openssl makes of it: a P-256 public key.
            let text = try s.run(["key", "export-public", "--standard"]).out
            #expect(text.hasPrefix("-----BEGIN PUBLIC KEY-----"))
            // A second recipient, from another home, listed in a recipients file as base64 lines.
            expectExit(try s.run(["init"], environment: s.elsewhere("other")), 0)
            expectExit(try s.run(["key", "generate"], environment: s.elsewhere("other")), 0)
            let otherPEM = try s.run(["key", "export-public"], environment: s.elsewhere("other")).out
            let line = otherPEM.split(separator: "\n").dropFirst().dropLast().joined()
            let list = try s.file("recipients.txt", Array("# the other machine\n\n\(line)\n".utf8))
            let pw = try s.passwordFile()
            let archive = s.path("mixed.nu11vlt")
            let created = try s.run(["create", "--portable", "--recipient", spki, "--recipients-file", list,
                                     "--password-file", pw, "-o", archive] + fastKDF)
            expectExit(created, 0)
            #expect(created.out.contains("for 2 recipient(s) and a password"), "\(created)")
            expectExit(try s.run(["verify", archive]), 0)
            expectExit(try s.run(["verify", archive], environment: s.elsewhere("other")), 0)
            expectExit(try s.run(["verify", archive, "--password-file", pw], environment: s.elsewhere("third")), 0)
        }
    }

    @Test("rekey from the command line: add a recipient with the password, change the password, refuse to lock everyone out")
    func rekey() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            expectExit(try s.run(["init"], environment: s.elsewhere("laptop")), 0)
            expectExit(try s.run(["key", "generate"], environment: s.elsewhere("laptop")), 0)
            let laptop = try s.file("laptop.pub", Array(try s.run(["key", "export-public"], environment: s.elsewhere("laptop")).stdout))
            let added = try s.run(["rekey", archive, "--password-file", pw, "--add-recipient", laptop])
            expectExit(added, 0)
            #expect(added.out.contains("opens with 1 password and 1 recipient"), "\(added)")
            expectExit(try s.run(["verify", archive], environment: s.elsewhere("laptop")), 0)
            // Rekeyed in place, it still counts as written by this home.
            expectExit(try s.run(["verify", "--as-written", archive]), 0)
            // A copy rekeyed in place does not take over the original's record: the original
            // still verifies as written (it looked damaged, and blocked prune, before).
            let copy = s.path("copy.nu11vlt")
            try FileManager.default.copyItem(atPath: archive, toPath: copy)
            expectExit(try s.run(["rekey", copy, "--password-file", pw, "--remove-recipients"]), 0)
            expectExit(try s.run(["verify", "--as-written", archive]), 0)

            // The password it already opens with, added again: refused, nothing changed.
            let unchanged = try readBytes(archive)
            let twice = try s.run(["rekey", archive, "--password-file", pw, "--add-password", "--new-password-file", pw] + fastKDF)
            expectExit(twice, 64)
            let afterTwice = try readBytes(archive)
            #expect(twice.err.contains("already opens with that password") && afterTwice == unchanged, "\(twice)")

            let newPassword = try s.passwordFile("a different long passphrase\n", name: "new-password")
            let changed = try s.run(["rekey", archive, "--password-file", pw, "--remove-passwords", "--add-password",
                                     "--new-password-file", newPassword] + fastKDF)
            expectExit(changed, 0)
            expectExit(try s.run(["verify", archive, "--password-file", pw], environment: s.elsewhere("third")), 77)
            expectExit(try s.run(["verify", archive, "--password-file", newPassword], environment: s.elsewhere("third")), 0)

            let before = try readBytes(archive)
            let locked = try s.run(["rekey", archive, "--password-file", newPassword, "--remove-passwords", "--remove-recipients"])
            expectExit(locked, 64)
            #expect(locked.err.contains("nobody could open it"), "\(locked)")
            #expect(try readBytes(archive) == before)
            expectExit(try s.run(["rekey", archive, "--password-file", newPassword]), 64)
            let wrong = try s.run(["rekey", archive, "--password-file", pw, "--add-recipient", laptop])
            expectExit(wrong, 77)
            #expect(try readBytes(archive) == before)
        }
    }

    @Test("bad recipient files and key commands without keys: clear messages, documented codes, nothing written")
    func mistakes() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let archive = s.path("x.nu11vlt")
            for (name, content) in [("empty.pub", ""), ("garbage.pub", "hello\n"),
                                    ("private.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
                                    ("offcurve.pub", "-----BEGIN PUBLIC KEY-----\nBAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE=\n-----END PUBLIC KEY-----\n")] {
                let result = try s.run(["create", "--portable", "--recipient", try s.file(name, Array(content.utf8)), "-o", archive])
                expectExit(result, 64)
                #expect(result.err.contains(name), "\(name): \(result)")
                #expect(!FileManager.default.fileExists(atPath: archive))
            }
            let missing = try s.run(["create", "--portable", "--recipient", s.path("nope.pub"), "-o", archive])
            expectExit(missing, 66)
            let secure = try s.run(["create", "--secure", "--recipient", s.path("nope.pub"), "-o", archive])
            expectExit(secure, 64)
            let none = try s.run(["key", "export-public"])
            expectExit(none, 66)
            #expect(none.err.contains("key generate"), "\(none)")
            expectExit(try s.run(["key", "generate"]), 0)
            let twice = try s.run(["key", "generate"])
            expectExit(twice, 73)
            #expect(try s.run(["keys", "list"]).status == 0, "'keys' is the same group")
        }
    }
}

/// The permission bits of `path`, or nil if it cannot be read.
func fileMode(_ path: String) -> mode_t? {
    var st = stat()
    return stat(path, &st) == 0 ? st.st_mode & 0o7777 : nil
}

@Suite("n11archive CLI: write-only backups and prune")
struct WriteOnlyPruneTests {
    @Test("prune on the machine that wrote recipient-only archives: counts them by their records, refuses when the newest changed")
    func pruneWriteOnly() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            // The identity lives elsewhere: this machine only has the public key.
            let pub = try s.offlinePublicKey()
            let dir = s.path("backups")
            let made = try s.recipientArchives(3, for: pub, in: dir)
            // Nothing here opens them, yet each is known as written here.
            expectExit(try s.run(["verify", made[2]]), 77)
            let asWritten = try s.run(["verify", "--as-written", made[2]])
            expectExit(asWritten, 0)
            #expect(asWritten.out.contains("byte for byte"), "\(asWritten)")
            expectExit(try s.run(["verify", "--as-written", made[2]], environment: s.elsewhere("offline")), 77)

            // The newest changed on disk (bit rot): prune deletes nothing.
            var bytes = try readBytes(made[2])
            bytes[bytes.count / 2] ^= 0x01
            let original = try readBytes(made[2])
            try writeBytes(bytes, to: made[2])
            let refused = try s.run(["prune", dir, "--keep-last", "1"])
            expectExit(refused, 65)
            #expect(refused.err.contains("nothing was deleted"), "\(refused)")
            #expect(made.allSatisfy { FileManager.default.fileExists(atPath: $0) })
            expectExit(try s.run(["verify", "--as-written", made[2]]), 65)

            // Sound again: the two older ones go; the offline identity still opens the kept one.
            try writeBytes(original, to: made[2])
            let pruned = try s.run(["prune", dir, "--keep-last", "1"])
            expectExit(pruned, 0)
            #expect(!FileManager.default.fileExists(atPath: made[0]) && !FileManager.default.fileExists(atPath: made[1]))
            #expect(FileManager.default.fileExists(atPath: made[2]))
            expectExit(try s.run(["verify", made[2]], environment: s.elsewhere("offline")), 0)

            // A recipient archive this home did not write (another machine's, dated later)
            // opens with nothing here either: it must neither count nor be deleted.
            let other = s.elsewhere("other")
            expectExit(try s.run(["init"], environment: other), 0)
            expectExit(try s.run(["vault", "add", try s.file("x.jpg", [1, 2, 3])], environment: other), 0)
            let foreign = dir + "/n11archive-20991231T235959Z.nu11vlt"
            expectExit(try s.run(["create", "--portable", "--recipient", pub, "-o", foreign], environment: other), 0)
            let again = try s.run(["prune", dir, "--keep-last", "1"])
            expectExit(again, 0)
            #expect(again.err.contains("is not counted as this home's"), "\(again)")
            #expect(FileManager.default.fileExists(atPath: made[2]) && FileManager.default.fileExists(atPath: foreign))
        }
    }
}

@Suite("n11archive CLI: a public key from a private key file")
struct ExportPublicFromFileTests {
    @Test("key export-public --from FILE writes the public key of an identity file, on a machine with no key store")
    func fromFile() throws {
        try withSandbox { s in
            try s.initialize()
            expectExit(try s.run(["key", "generate"]), 0)
            let pp = try s.passphraseFile()
            let key = s.path("backup.key")
            expectExit(try s.run(["key", "export-private", "-o", key, "--passphrase-file", pp]), 0)
            let fromStore = try s.run(["key", "export-public"])
            let bare = s.elsewhere("bare")
            let fromFile = try s.run(["key", "export-public", "--from", key, "--passphrase-file", pp], environment: bare)
            expectExit(fromFile, 0)
            #expect(fromFile.out == fromStore.out && !fromFile.out.isEmpty, "\(fromFile)")
            #expect(!exists(s.path("bare")), "no home was made")
            expectExit(try s.run(["key", "export-public", "--from", key, "--passphrase-file", try s.passphraseFile("another long one")],
                                 environment: bare), 77)
        }
    }
}

@Suite("n11archive CLI: verify --as-written of several archives (README's glob)")
struct VerifySeveralTests {
    @Test("verify --as-written A B C checks each in order, prints a line each (one --json document), and the first damaged one ends the run")
    func several() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let made = try s.recipientArchives(3, for: try s.offlinePublicKey(), in: s.path("backups"))
            let all = try s.run(["verify", "--as-written"] + made)
            expectExit(all, 0)
            #expect(all.out.split(separator: "\n").filter { $0.hasPrefix("ok: ") }.count == 3, "\(all)")
            let json = try s.run(["verify", "--as-written", "--json"] + made)
            expectExit(json, 0)
            #expect((try jsonDocument(json)["archives"] as? [[String: Any]])?.count == 3, "\(json)")
            // A password from a descriptor is read once for all of them.
            let pw = try s.passwordFile()
            let dir = s.path("portable")
            mkdir(dir, 0o700)
            let portable = try s.datedArchives(2, in: dir, password: pw)
            expectExit(try s.run(["verify", "--password-fd", "3"] + portable, descriptors: [3: pw]), 0)
            try flipByte(in: made[1], at: 200)
            let damaged = try s.run(["verify", "--as-written"] + made)
            expectExit(damaged, 65)
            #expect(damaged.out.contains(made[0]) && !damaged.out.contains(made[2]), "\(damaged)")
        }
    }
}

@Suite("n11archive CLI: key store PIN and backups")
struct KeyStoreManagementTests {
    @Test("a key store made by restore gets a PIN, changes it, loses it; the old PIN stops working")
    func pinLifecycle() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            // A new machine: restore made the key store, without a PIN.
            let new = s.elsewhere("new")
            expectExit(try s.run(["restore", archive, "--password-file", pw], environment: new), 0)
            let first = try s.passwordFile("first pin 1234\n", name: "pin1")
            let second = try s.passwordFile("second pin 5678\n", name: "pin2")
            expectExit(try s.run(["key", "set-pin", "--new-pin-file", first], environment: new), 0)
            expectExit(try s.run(["vault", "list"], environment: new), 77)
            expectExit(try s.run(["vault", "list", "--pin-file", first], environment: new), 0)
            // Changing needs the current PIN.
            expectExit(try s.run(["key", "set-pin", "--new-pin-file", second, "--pin-file", second], environment: new), 77)
            expectExit(try s.run(["key", "set-pin", "--new-pin-file", second, "--pin-file", first], environment: new), 0)
            expectExit(try s.run(["vault", "list", "--pin-file", first], environment: new), 77)
            expectExit(try s.run(["vault", "list", "--pin-file", second], environment: new), 0)
            // A short PIN is refused and changes nothing.
            let short = try s.passwordFile("1234\n", name: "pin3")
            expectExit(try s.run(["key", "set-pin", "--new-pin-file", short, "--pin-file", second], environment: new), 64)
            expectExit(try s.run(["vault", "list", "--pin-file", second], environment: new), 0)
            expectExit(try s.run(["key", "remove-pin", "--pin-file", second], environment: new), 0)
            expectExit(try s.run(["vault", "list"], environment: new), 0)
            expectExit(try s.run(["key", "remove-pin"], environment: new), 64)
        }
    }

    @Test("key backup holds every key: a secure archive and a recipient archive restore on a new machine from it alone")
    func backupRestore() throws {
        try withSandbox { s in
            let originals = try s.fillVault()
            expectExit(try s.run(["key", "generate"]), 0)
            let pub = try s.file("me.pub", Array(try s.run(["key", "export-public"]).stdout))
            let secure = s.path("s.nu11vlt"), forMe = s.path("r.nu11vlt")
            expectExit(try s.run(["create", "--secure", "-o", secure]), 0)
            expectExit(try s.run(["create", "--portable", "--recipient", pub, "-o", forMe]), 0)
            let pp = try s.passphraseFile()
            let backup = s.path("keys.n11backup")
            expectExit(try s.run(["key", "backup", "-o", backup, "--passphrase-file", pp]), 0)
            #expect(fileMode(backup) == 0o600)
            expectExit(try s.run(["key", "backup", "-o", backup, "--passphrase-file", pp]), 73)

            let new = s.elsewhere("new")
            let wrong = try s.run(["key", "restore", backup, "--passphrase-file", try s.passphraseFile("not the passphrase")], environment: new)
            expectExit(wrong, 77)
            #expect(!FileManager.default.fileExists(atPath: s.path("new")), "a refused restore creates nothing")
            expectExit(try s.run(["key", "restore", backup, "--passphrase-file", pp], environment: new), 0)
            expectExit(try s.run(["key", "restore", backup, "--passphrase-file", pp], environment: new), 73)
            for archive in [secure, forMe] {
                let export = s.path("export-" + lastComponent(archive))
                expectExit(try s.run(["restore", archive, "--export", export], environment: new), 0)
                for (name, bytes) in originals {
                    let folder = name.hasSuffix(".txt") ? "Notes" : "Photos"
                    #expect(try readBytes("\(export)/\(folder)/\(name)") == bytes, "\(archive): \(name)")
                }
            }
            // The restored store's vault is the original's: same keys, same store ID.
            #expect(try s.run(["vault", "list", "--vault", s.vault], environment: new).status == 0)
        }
    }
}
