import Foundation
import Glibc
import Testing
import N11TestSupport

/// Secrets given in the wrong place, and secrets that could not be read back (issue 25
/// findings 11, 12, 13).
@Suite("n11archive CLI: secrets that would be lost, echoed or trusted blindly")
struct SecretHandlingTests {
    @Test("key export-private refuses a passphrase OpenSSL could not read back (over 1,023 bytes, or a NUL); 1,023 bytes round-trip")
    func pemPassphraseLength() throws {
        try withSandbox { s in
            try s.initialize()
            expectExit(try s.run(["key", "generate"]), 0)
            for (name, bytes) in [("long", Array(repeating: UInt8(ascii: "a"), count: 1024)),
                                  ("nul", Array("a passphrase".utf8) + [0] + Array("with a NUL".utf8))] {
                let pp = try s.file("pp-\(name)", bytes + [0x0A])
                chmod(pp, 0o600)
                let key = s.path("\(name).key")
                let refused = try s.run(["key", "export-private", "-o", key, "--passphrase-file", pp])
                expectExit(refused, 64)
                #expect(refused.err.contains("at most 1023 bytes"), "\(refused)")
                #expect(!exists(key), "a key file nothing can open was written")
            }
            let pp = try s.file("pp-1023", Array(repeating: UInt8(ascii: "b"), count: 1023) + [0x0A])
            chmod(pp, 0o600)
            let key = s.path("longest.key")
            expectExit(try s.run(["key", "export-private", "-o", key, "--passphrase-file", pp]), 0)
            let elsewhere = s.elsewhere("other-machine")
            expectExit(try s.run(["init"], environment: elsewhere), 0)
            expectExit(try s.run(["key", "import", key, "--passphrase-file", pp], environment: elsewhere), 0)
            // A passphrase OpenSSL cannot take is said to be so, not called wrong.
            let tooLong = try s.run(["key", "import", key, "--passphrase-file", s.path("pp-long")], environment: s.elsewhere("third"))
            #expect(tooLong.err.contains("cannot open a PEM key"), "\(tooLong)")
            if FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") {
                let p = Process()
                p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
                p.arguments = ["pkey", "-in", key, "-passin", "file:\(pp)", "-noout"]
                p.standardError = FileHandle.nullDevice
                try p.run()
                p.waitUntilExit()
                #expect(p.terminationStatus == 0, "openssl pkey cannot read it")
            }
        }
    }

    @Test("a secret file given where a public key is expected is named by line, never echoed (text or --json)")
    func secretNotEchoed() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let marker = "SECRETMARKER-correct-horse"
            let secretFile = try s.passwordFile(marker + " battery staple\n", name: "my-password")
            for json in [false, true] {
                let run = try s.run(["create", "--portable", "--recipient", secretFile, "-o", s.path("x-\(json).nu11vlt")] + (json ? ["--json"] : []))
                expectExit(run, 64)
                #expect(!run.err.contains("SECRETMARKER") && !run.out.contains("SECRETMARKER"), "\(run)")
                #expect((run.err + run.out).contains("line 1"), "\(run)")
            }
        }
    }

    @Test("a missing public key file is named as a key file, with the command that writes one (66)")
    func missingKeyFile() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let run = try s.run(["create", "--portable", "--recipient", s.path("backup.pub"), "-o", s.path("x.nu11vlt")])
            expectExit(run, 66)
            #expect(run.err.contains("the key file") && run.err.contains("key export-public") && !run.err.contains("archive's path"), "\(run)")
        }
    }

    @Test("a secret file given where a Ciphio message is expected is not echoed")
    func ciphioInputNotEchoed() throws {
        try withSandbox { s in
            try s.initialize()
            let pw = try s.passwordFile()
            let secretFile = try s.file("netrc", Array("SECRETMRK:machine example.com password hunter2\n".utf8))
            for args in [["text", "decrypt", secretFile, "--password-file", pw],
                         ["vault", "add", "--note", "--from-ciphio", secretFile, "--password-file", pw]] {
                let run = try s.run(args)
                expectExit(run, 65)
                #expect(!run.err.contains("SECRETMRK") && !run.out.contains("SECRETMRK"), "\(run)")
            }
        }
    }

    @Test("vault add --from-ciphio refuses an unauthenticated (cbc, ctr) message unless --allow-unauthenticated, and then warns")
    func unauthenticatedCiphio() throws {
        try withSandbox { s in
            try s.initialize()
            let pw = try s.passwordFile()
            for algorithm in ["ctr", "cbc"] {
                let message = try s.file("\(algorithm).txt", try s.run(["text", "encrypt", "--algorithm", algorithm, "--password-file", pw],
                                                                      stdin: Array("pay 100".utf8)).stdout)
                let refused = try s.run(["vault", "add", "--note", "--from-ciphio", message, "--password-file", pw])
                expectExit(refused, 64)
                #expect(refused.err.contains("not authenticated") && refused.err.contains("--allow-unauthenticated"), "\(refused)")
                #expect(try s.list().items.isEmpty, "a \(algorithm) message was stored")
            }
            let added = try s.run(["vault", "add", "--note", "--from-ciphio", s.path("ctr.txt"), "--allow-unauthenticated", "--password-file", pw])
            expectExit(added, 0)
            #expect(added.err.contains("not authenticated"), "\(added)")
            #expect(try s.list().items.count == 1)
            expectExit(try s.run(["vault", "add", "--note", "--allow-unauthenticated"], stdin: Array("x".utf8)), 64)
        }
    }

    @Test("vault add --from-ciphio of a message that decrypts to bytes that are not UTF-8: a gcm one (authentic) says what it holds and how to keep it (1); a ctr one under a wrong password says so (77); nothing is added")
    func ciphioMessageNotText() throws {
        try withSandbox { s in
            try s.initialize()
            let pw = try s.passwordFile()
            let other = try s.file("other-pw", Array("another password, not the one it was made with\n".utf8))
            let bytes: [UInt8] = (0..<256).map { UInt8($0) }.reversed()
            let gcm = try s.file("gcm.txt", try s.run(["text", "encrypt", "--password-file", pw], stdin: bytes).stdout)
            let refused = try s.run(["vault", "add", "--note", "--from-ciphio", gcm, "--password-file", pw])
            expectExit(refused, 1)
            #expect(refused.err.contains("the message in '\(gcm)' opened, but what it holds is not UTF-8 text") &&
                    refused.err.contains("`n11archive text decrypt FILE | n11archive vault add - --name NAME`") &&
                    !refused.err.contains("wrong password"), "\(refused)")
            // 200 bytes of text under a wrong key are not UTF-8 but by a chance of about 2^-100.
            let ctr = try s.file("ctr.txt", try s.run(["text", "encrypt", "--algorithm", "ctr", "--password-file", pw],
                                                      stdin: Array(String(repeating: "pay 100 ", count: 25).utf8)).stdout)
            let wrong = try s.run(["vault", "add", "--note", "--from-ciphio", ctr, "--allow-unauthenticated", "--password-file", other])
            expectExit(wrong, 77)
            #expect(wrong.err.contains("the ctr message in '\(ctr)' decrypted to bytes that are not UTF-8 text: most likely a wrong password"), "\(wrong)")
            #expect(try s.list().items.isEmpty)
            // What the gcm hint says keeps the bytes as they are.
            let decrypted = try s.run(["text", "decrypt", gcm, "--password-file", pw])
            expectExit(decrypted, 0)
            expectExit(try s.run(["vault", "add", "-", "--name", "payload"], stdin: decrypted.stdout), 0)
            let id = try #require(try s.list().items.first { $0["name"] as? String == "payload" }?["id"] as? String)
            expectExit(try s.run(["vault", "cat", id, "-o", s.path("payload.out")]), 0)
            #expect(FileManager.default.contents(atPath: s.path("payload.out")).map { Array($0) } == bytes)
        }
    }
}
