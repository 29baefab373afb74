import Foundation
import Glibc
import Testing
import N11TestSupport

// The misleading messages a new user met (issue 15), each pinned: what it says now, and
// the exit code README gives.

@Suite("n11archive CLI: messages that used to mislead")
struct MisleadingMessageTests {

    @Test("--vault on a missing directory is a missing vault (66), not 'exists but is not a vault'")
    func missingVault() throws {
        try withSandbox { s in
            try s.initialize()
            let run = try s.run(["vault", "list", "--vault", s.path("nowhere")])
            expectExit(run, 66)
            #expect(run.err.contains("there is no vault at '\(s.path("nowhere"))'") && !run.err.contains("exists"), "\(run)")
        }
    }

    @Test("create -o DIR is refused before any work (64) and names a file to give; no output appears")
    func outputDirectory() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let dir = s.path("dir")
            mkdir(dir, 0o700)
            let run = try s.run(["create", "--portable", "-o", dir, "--password-file", try s.passwordFile()] + fastKDF)
            expectExit(run, 64)
            #expect(run.err.contains("is a directory") && !run.err.contains("--force"), "\(run)")
            #expect(listing(of: dir).isEmpty)

            // A remote directory (a trailing slash, or the remote alone) is refused the same
            // way, before rclone is asked anything: it was published as DIR/DIR.
            for remote in ["nas:backups/", "nas:"] {
                let run = try s.run(["create", "--portable", "-o", remote, "--password-file", try s.passwordFile()] + fastKDF)
                expectExit(run, 64)
                #expect(run.err.contains("'\(remote)' is a directory") && run.err.contains("--output-dir \(remote)"), "\(run)")
            }
            let named = try s.run(["create", "--portable", "-o", "nas:backups/", "--password-file", try s.passwordFile()] + fastKDF)
            #expect(named.err.contains("-o nas:backups/vault.nu11vlt"), "\(named)")
        }
    }

    @Test("a damaged item in an archive whose password is right is named as damaged, not as a wrong key")
    func damagedItemNotWrongKey() throws {
        try withSandbox { s in
            let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("Fixtures/vectors/archive").path
            let run = try s.run(["verify", fixtures + "/item-flipped.nu11vlt", "--password-file", fixtures + "/../../golden/portable-v1.password"])
            expectExit(run, 65)
            #expect(run.err.contains("the archive's key is right") && !run.err.contains("wrong key"), "\(run)")
        }
    }

    @Test("usage errors read `n11archive: error:`, a mistyped command or flag gets a did-you-mean")
    func usageErrors() throws {
        try withSandbox { s in
            let typo = try s.run(["create", "--portabel", "-o", s.path("x.nu11vlt")])
            expectExit(typo, 64)
            #expect(typo.err.contains("n11archive: error: unknown option '--portabel'; did you mean '--portable'?"), "\(typo)")
            let rule = try s.run(["prune", s.path("backups"), "--keep-dayly", "3"])
            expectExit(rule, 64)
            #expect(rule.err.contains("unknown option '--keep-dayly'; did you mean '--keep-daily'?"), "\(rule)")
            let command = try s.run(["retore", "x.nu11vlt"])
            expectExit(command, 64)
            #expect(command.err.contains("n11archive: error: unknown command 'retore'"), "\(command)")
            #expect(command.err.contains("did you mean `n11archive restore`?"), "\(command)")
            let sub = try s.run(["vault", "lst"])
            #expect(sub.err.contains("did you mean `n11archive vault list`?"), "\(sub)")
            for run in [typo, command, sub] { #expect(!run.err.contains("Error:"), "\(run)") }
        }
    }

    @Test("create --secure with a password option is refused (64), not ignored")
    func securePassword() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let out = s.path("s.nu11vlt")
            let run = try s.run(["create", "--secure", "-o", out, "--password-file", try s.passwordFile()])
            expectExit(run, 64)
            #expect(run.err.contains("takes no password"), "\(run)")
            #expect(!exists(out))
        }
    }

    @Test("a plain ZIP is named once as no archive; a directory as an archive is 66; an output in a missing directory names it")
    func archivePaths() throws {
        try withSandbox { s in
            let zip = s.path("plain.zip")
            #expect(try ChildRun.run("/usr/bin/env", ["python3", "-c", "import zipfile,sys; zipfile.ZipFile(sys.argv[1],'w').writestr('a','b')", zip]) == 0)
            let plain = try s.run(["info", zip])
            expectExit(plain, 65)
            #expect(plain.err.components(separatedBy: "not an n11archive archive").count == 2, "\(plain)")

            let directory = try s.run(["info", s.root])
            expectExit(directory, 66)
            #expect(directory.err.contains("is a directory, not an archive file"), "\(directory)")

            _ = try s.fillVault()
            let target = s.path("missing-dir/x.nu11vlt")
            let unwritable = try s.run(["create", "--portable", "-o", target, "--password-file", try s.passwordFile()] + fastKDF)
            #expect(unwritable.status != 0)
            #expect(unwritable.err.contains("'\(s.path("missing-dir"))'") && !unwritable.err.contains(".n11tmp"), "\(unwritable)")
        }
    }

    @Test("a restore onto a fresh home into another key store's vault says so, without naming the key store it removed")
    func restoreIntoForeignVault() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let password = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", password] + fastKDF), 0)
            let home2 = s.path("home2")
            let run = try s.run(["restore", archive, "--vault", s.vault, "--password-file", password], environment: ["N11_HOME": home2])
            expectExit(run, 77)
            #expect(run.err.contains("was made with another key store") && !run.err.contains("keystore.n11keys"), "\(run)")
            #expect(!exists(home2 + "/keystore.n11keys"))
        }
    }

    @Test("restore --dry-run of a portable archive needs no PIN: it verifies and says it did not compare with the vault")
    func dryRunWithoutPIN() throws {
        try withSandbox { s in
            let pin = try s.file("pin", Array("86420975\n".utf8))
            chmod(pin, 0o600)
            expectExit(try s.run(["init", "--pin", "--pin-file", pin]), 0)
            expectExit(try s.run(["vault", "add", try s.file("a.jpg", [1, 2, 3]), "--pin-file", pin]), 0)
            let password = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", password, "--pin-file", pin] + fastKDF), 0)
            let dry = try s.run(["restore", archive, "--dry-run", "--password-file", password])
            expectExit(dry, 0)
            #expect(dry.err.contains("without comparing it with the vault") && dry.out.contains("would restore 1 item(s)"), "\(dry)")
        }
    }

    @Test("a password file readable by others is warned about; help gives each default once; --lock-wait says it waits")
    func smallThings() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let open = try s.file("open-password", Array("correct horse battery staple\n".utf8))
            chmod(open, 0o644)
            let archive = s.path("a.nu11vlt")
            let made = try s.run(["create", "--portable", "-o", archive, "--password-file", open] + fastKDF)
            expectExit(made, 0)
            #expect(made.err.contains("warning: the password file '\(open)' can be read by others (mode 644); run `chmod 600"), "\(made)")

            let help = try s.run(["create", "--help"])
            #expect(!help.out.contains("(default 3)") && help.out.contains("(default: 3)"), "\(help.out)")

            // Another process holds the vault's lock for two seconds.
            let holder = Process()
            holder.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
            holder.arguments = [s.vault + "/.lock", "sleep", "2"]
            try holder.run()
            usleep(300_000)
            let waited = try s.run(["vault", "add", try s.file("late.jpg", [9]), "--lock-wait", "1"])
            holder.waitUntilExit()
            expectExit(waited, 75)
            #expect(waited.err.contains("waiting up to 1 s for it to finish"), "\(waited)")
        }
    }

    @Test("a password given as a flag is refused for what it is (64), without echoing it or pointing at --password-fd")
    func passwordAsFlag() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let secret = "hunter2-correct-horse"
            for words in [["--password", secret], ["--password=\(secret)"], ["--passphrase", secret]] {
                let run = try s.run(["create", "--portable", "-o", s.path("a.nu11vlt")] + words)
                expectExit(run, 64)
                #expect(run.err.contains("never taken as a flag's value") && run.err.contains("--password-file FILE"), "\(run)")
                #expect(!run.err.contains("did you mean") && !run.out.contains(secret) && !run.err.contains(secret), "\(run)")
                #expect(!exists(s.path("a.nu11vlt")))
            }
            // Each secret's own sources: a PIN's, rekey's added password's, a key file's passphrase.
            for (command, secretName, source) in [(["init", "--pin=\(secret)"], "a PIN", "--pin-file FILE"),
                                                  (["rekey", s.path("a.nu11vlt"), "--add-password", "--new-password", secret], "a password", "--new-password-file FILE"),
                                                  (["unseal", s.path("x.n11lock"), "--passphrase", secret], "a passphrase", "--passphrase-file FILE")] {
                let run = try s.run(command)
                expectExit(run, 64)
                #expect(run.err.contains("\(secretName) is never taken as a flag's value") && run.err.contains(source), "\(run)")
                #expect(!run.err.contains(secret), "\(run)")
            }
            // A missing file for a two-word secret names its option and variable as they are spelled.
            let newPIN = try s.run(["key", "set-pin", "--new-pin-file", s.path("nope")])
            expectExit(newPIN, 66)
            #expect(newPIN.err.contains("--new-pin-file (or $N11_NEW_PIN_FILE)"), "\(newPIN)")
            // A current PIN file for a key store without a PIN is not read, and that is said.
            let set = try s.run(["key", "set-pin", "--pin-file", s.path("old-pin"), "--new-pin-file", try s.file("new-pin", Array("24681357\n".utf8))])
            expectExit(set, 0)
            #expect(set.err.contains("the key store had no PIN, so the current PIN (--pin-file/--pin-fd) was not read"), "\(set)")
        }
    }

    @Test("restore FILE DIR: a word with '/' is a place, not an item: --export or --vault is named (64), before any password")
    func restoreIntoAPath() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", try s.passwordFile()] + fastKDF), 0)
            let place = s.path("restored")
            // No password source: a prompt would fail differently; this is refused first.
            let run = try s.run(["restore", archive, place])
            expectExit(run, 64)
            #expect(run.err.contains("'\(place)' is no item") && run.err.contains("--export '\(place)'") && run.err.contains("--vault '\(place)'"), "\(run)")
            #expect(!exists(place))
        }
    }

    @Test("a secure archive where no key store is: says that only the home that made it opens it (78), not 'run init'")
    func secureArchiveWithoutKeyStore() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let archive = s.path("s.nu11vlt")
            expectExit(try s.run(["create", "--secure", "-o", archive]), 0)
            let elsewhere = ["N11_HOME": s.path("nohome")]
            for command in [["verify", archive], ["restore", archive], ["restore", archive, "--export", s.path("out")]] {
                let run = try s.run(command, environment: elsewhere)
                expectExit(run, 78)
                #expect(run.err.contains("is a secure archive, which opens only with the key store of the home that made it"), "\(run)")
                #expect(run.err.contains("a new `n11archive init` cannot open it") && !run.err.contains("run `n11archive init` first"), "\(run)")
            }
            #expect(!exists(s.path("nohome")) && !exists(s.path("out")))
        }
    }

    @Test("an ambiguous name or prefix asks for the ID or enough of it, and says the listing shows IDs and names")
    func ambiguousName() throws {
        try withSandbox { s in
            try s.initialize()
            expectExit(try s.run(["vault", "add", try s.file("IMG_0001.jpg", [1, 2, 3])]), 0)
            mkdir(s.path("other"), 0o700)
            let second = s.path("other/IMG_0001.jpg")
            #expect(FileManager.default.createFile(atPath: second, contents: Data([4, 5, 6])))
            expectExit(try s.run(["vault", "add", second]), 0)
            let run = try s.run(["vault", "cat", "IMG_0001.jpg", "-o", "-"])
            expectExit(run, 66)
            #expect(run.err.contains("matches 2 items") && run.err.contains("give the item's ID, or enough of it to be unique"), "\(run)")
            #expect(run.stdout.isEmpty)
        }
    }

    @Test("a copy cut short before its manifest's root: verify says so (65); a salvage restores what arrived, says the root is missing and exits 3")
    func cutShortBeforeTheRoot() throws {
        try withSandbox { s in
            let originals = try s.fillVault()
            let archive = s.path("a.nu11vlt"), half = s.path("half.nu11vlt"), rootless = s.path("rootless.nu11vlt")
            let password = try s.passwordFile()
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", password] + fastKDF), 0)
            let bytes = try readBytes(archive)
            #expect(FileManager.default.createFile(atPath: half, contents: Data(bytes.prefix(bytes.count / 2))))
            let verified = try s.run(["verify", half, "--password-file", password])
            expectExit(verified, 65)
            #expect(verified.err.contains("if the header and manifest are intact"), "\(verified)")
            // Cut within the one pack: the page arrived, its items did not.
            let salvagedHalf = try s.run(["restore", half, "--salvage", "--export", s.path("out-half"), "--password-file", password])
            expectExit(salvagedHalf, 3)
            #expect(salvagedHalf.err.contains("has no manifest root (a copy cut short?)") && salvagedHalf.err.contains("page 1 is missing"), "\(salvagedHalf)")
            #expect(salvagedHalf.err.components(separatedBy: "not restored:").count - 1 == originals.count, "\(salvagedHalf)")
            let files = FileManager.default.enumerator(atPath: s.path("out-half"))?.allObjects as? [String] ?? []
            #expect(files.isEmpty, "\(files)")
            // Cut just into the root (the archive's last entry): every item arrived.
            let rootName = Array("Manifest/root.n11".utf8)
            let nameAt = try #require((0...(bytes.count - rootName.count)).first { Array(bytes[$0..<$0 + rootName.count]) == rootName })
            #expect(FileManager.default.createFile(atPath: rootless, contents: Data(bytes.prefix(nameAt + rootName.count + 10))))
            let salvaged = try s.run(["restore", rootless, "--salvage", "--export", s.path("out"), "--password-file", password, "--json"])
            expectExit(salvaged, 3)
            #expect(salvaged.err.contains("has no manifest root (a copy cut short?)"), "\(salvaged)")
            let document = try #require(try JSONSerialization.jsonObject(with: Data(salvaged.stdout)) as? [String: Any])
            #expect(document["outcome"] as? String == "partial")
            #expect(document["manifestRootMissing"] as? Bool == true)
            #expect((document["damaged"] as? [Any])?.isEmpty == true)
            for (name, original) in originals {
                #expect(try readBytes(s.path("out/" + (name.hasSuffix(".txt") ? "Notes/" : "Photos/") + name)) == original, "\(name)")
            }
            // Into the vault of a new home, without --json: the same, said in words.
            let intoVault = try s.run(["restore", rootless, "--salvage", "--home", s.path("home2"), "--password-file", password])
            expectExit(intoVault, 3)
            #expect(intoVault.err.contains("restore ends partial (exit 3)") && intoVault.err.contains("pages that were not read are not known"), "\(intoVault)")
            #expect((String(decoding: intoVault.stdout, as: UTF8.self) + intoVault.err).contains("restored \(originals.count) item(s)"), "\(intoVault)")
            // An item the pages that arrived do not hold may be on one that did not: said so.
            let absent = try s.run(["restore", rootless, "ABCDEF12", "--salvage", "--export", s.path("out3"), "--password-file", password])
            expectExit(absent, 66)
            #expect(absent.err.contains("no item 'ABCDEF12' in the 1 manifest page(s) of '\(rootless)' that read")
                    && absent.err.contains("cut short before its manifest's root") && absent.err.contains("a whole copy"), "\(absent)")
            #expect(!exists(s.path("out3")))
            // Without --salvage nothing is restored from it.
            let plain = try s.run(["restore", rootless, "--export", s.path("out2"), "--password-file", password])
            expectExit(plain, 65)
            #expect(!exists(s.path("out2")))
        }
    }

    @Test("create with the archive's name but no -o: the hint names -o NAME; an empty password file is named")
    func createWithoutDashO() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let run = try s.run(["create", "--portable", "backup.nu11vlt", "--password-file", try s.passwordFile()] + fastKDF)
            expectExit(run, 64)
            #expect(run.err.contains("did you mean `-o backup.nu11vlt`?"), "\(run)")
            let empty = try s.file("empty-password", Array("\n".utf8))
            chmod(empty, 0o600)
            let withEmpty = try s.run(["create", "--portable", "-o", s.path("a.nu11vlt"), "--password-file", empty] + fastKDF)
            expectExit(withEmpty, 64)
            #expect(withEmpty.err.contains("the password is empty (its file '\(empty)' has an empty first line)"), "\(withEmpty)")
            #expect(!exists(s.path("a.nu11vlt")))
        }
    }

    @Test("a --files-from list with CR LF line ends: the hint says so (66), and nothing is added")
    func windowsList() throws {
        try withSandbox { s in
            try s.initialize()
            let photo = try s.file("IMG_0001.jpg", [1, 2, 3])
            let list = try s.file("list.txt", Array("\(photo)\r\n".utf8))
            let run = try s.run(["vault", "add", "--files-from", list])
            expectExit(run, 66)
            #expect(run.err.contains("is the list a Windows (CR LF) file?") && run.err.contains("sed -i 's/\\r$//' LIST"), "\(run)")
            let spaced = try s.file("spaced.txt", Array("\(photo) \n".utf8))
            let second = try s.run(["vault", "add", "--files-from", spaced])
            expectExit(second, 66)
            #expect(second.err.contains("the path ends in a space"), "\(second)")
            #expect(try s.run(["vault", "list", "--json"]).out.contains("\"items\" : [\n\n  ]"))
        }
    }

    @Test("other tools' words (backup, export, check, add) name this tool's command; init with a password names the PIN")
    func otherToolsWords() throws {
        try withSandbox { s in
            for (word, meant) in [("backup", "create --portable -o FILE"), ("export", "restore ARCHIVE --export DIR"),
                                  ("check", "verify ARCHIVE"), ("add", "vault add FILE"), ("ls", "vault list")] {
                let run = try s.run([word, "x"])
                expectExit(run, 64)
                #expect(run.err.contains("unknown command '\(word)'") && run.err.contains("did you mean `n11archive \(meant)`?"), "\(run)")
            }
            // `archives` deletes nothing: its missing directory is not "nothing was deleted".
            let noDirectory = try s.run(["archives", s.path("backups")])
            expectExit(noDirectory, 66)
            #expect(noDirectory.err.contains("the archive directory '\(s.path("backups"))' does not exist")
                    && !noDirectory.err.contains("deleted"), "\(noDirectory)")
            let initWithPassword = try s.run(["init", "--password-file", s.path("pw")])
            expectExit(initWithPassword, 64)
            #expect(initWithPassword.err.contains("init asks for no password") && initWithPassword.err.contains("--pin"), "\(initWithPassword)")
            #expect(!exists(s.home), "nothing was made")
        }
    }

    @Test("a wrong password that ends in a space says the space is part of it; one that does not, says nothing of spaces")
    func passwordEndingInSpace() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", try s.passwordFile()] + fastKDF), 0)
            let spaced = try s.passwordFile("correct horse battery staple \n", name: "spaced")
            let run = try s.run(["verify", archive, "--password-file", spaced])
            expectExit(run, 77)
            #expect(run.err.contains("wrong password for") && run.err.contains("ends in a space or tab"), "\(run)")
            let wrong = try s.run(["verify", archive, "--password-file", try s.passwordFile("another one entirely\n", name: "wrong")])
            expectExit(wrong, 77)
            #expect(!wrong.err.contains("space"), "\(wrong)")
        }
    }

    @Test("the home's signing key given as a recipient is named as a signing key, with where a recipient key comes from")
    func signerAsRecipient() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let signer = s.path("signer.pub")
            expectExit(try s.run(["key", "export-public", "--signing", "-o", signer]), 0)
            let run = try s.run(["create", "--portable", "--recipient", signer, "-o", s.path("r.nu11vlt")])
            expectExit(run, 64)
            #expect(run.err.contains("Ed25519 signing key") && run.err.contains("key export-public` (without --signing)"), "\(run)")
            #expect(!exists(s.path("r.nu11vlt")))
        }
    }

    @Test("vault cat -o into a missing folder, or under a file, says which (66) and writes nothing")
    func catIntoMissingFolder() throws {
        try withSandbox { s in
            try s.initialize()
            expectExit(try s.run(["vault", "add", try s.file("a.jpg", [1, 2, 3])]), 0)
            let missing = try s.run(["vault", "cat", "a.jpg", "-o", s.path("nodir/out.jpg")])
            expectExit(missing, 66)
            #expect(missing.err.contains("the folder '\(s.path("nodir"))' does not exist; nothing was written")
                    && missing.err.contains("mkdir -p '\(s.path("nodir"))'"), "\(missing)")
            let underFile = try s.run(["vault", "cat", "a.jpg", "-o", s.path("a.jpg/out.jpg")])
            expectExit(underFile, 66)
            #expect(underFile.err.contains("'\(s.path("a.jpg"))' is not a folder"), "\(underFile)")
            // A file further up: the system's words, not a mkdir that would fail too.
            let belowFile = try s.run(["vault", "cat", "a.jpg", "-o", s.path("a.jpg/sub/out.jpg")])
            expectExit(belowFile, 66)
            #expect(belowFile.err.contains("Not a directory") && !belowFile.err.contains("mkdir"), "\(belowFile)")
            #expect(!exists(s.path("nodir")))
        }
    }
}
