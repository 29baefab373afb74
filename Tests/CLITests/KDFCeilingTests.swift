import Foundation
import Glibc
import Testing
import N11TestSupport

/// An archive's header is not authenticated until its key is derived, so its Argon2id cost
/// is the attacker's choice: above the local ceiling it is refused before any password is
/// read or any key derived; a person at a prompt is told the cost first.
@Suite("Argon2id cost from an archive: a local ceiling, and the cost shown before the prompt")
struct KDFCeilingTests {
    @Test("an archive asking for more than 512 MiB is refused (64) without running the password command; the flag or the environment allows it")
    func ceiling() throws {
        try withSandbox { s in
            try s.initialize()
            expectExit(try s.run(["vault", "add", try s.file("a.jpg", randomBytes(1000))]), 0)
            let pw = try s.passwordFile()
            let archive = s.path("costly.nu11vlt")
            let created = try s.run(["create", "--portable", "-o", archive, "--password-file", pw, "--kdf-ops", "1", "--kdf-memory", "520"])
            expectExit(created, 0)
            #expect(created.err.contains("--allow-kdf-memory 520"), "\(created)")

            // The password command leaves a mark when it runs: it must not, before the refusal.
            let mark = s.path("asked")
            let command = "touch '\(mark)'; cat '\(pw)'"
            for args in [["verify", archive], ["list", archive], ["restore", archive, "--dry-run"],
                         ["verify", archive, "--allow-kdf-memory", "519"]] {
                let refused = try s.run(args + ["--password-command", command])
                expectExit(refused, 64)
                #expect(refused.err.contains("520 MiB") && refused.err.contains("--allow-kdf-memory 520"), "\(refused)")
                #expect(!exists(mark), "the password was asked for: \(args)")
            }
            expectExit(try s.run(["verify", archive, "--password-file", pw, "--allow-kdf-memory", "520"]), 0)
            expectExit(try s.run(["verify", archive, "--password-file", pw], environment: ["N11_ALLOW_KDF_MEMORY": "600"]), 0)
            expectExit(try s.run(["verify", archive, "--password-file", pw], environment: ["N11_ALLOW_KDF_MEMORY": "lots"]), 64)
            expectExit(try s.run(["verify", archive, "--password-file", pw, "--allow-kdf-memory", "2048"]), 64)
        }
    }

    @Test("on a terminal, the archive's Argon2id cost is shown before the password prompt",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "needs util-linux script"))
    func costShownBeforePrompt() throws {
        try withSandbox { s in
            try s.initialize()
            expectExit(try s.run(["vault", "add", try s.file("a.jpg", randomBytes(1000))]), 0)
            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            let (transcript, status) = try runOnTerminal(["verify", archive], typing: ["correct horse battery staple"], home: s.home)
            #expect(status == 0, "\(transcript)")
            let cost = try #require(transcript.range(of: "costs Argon2id, 1 pass of 8 MiB"), "\(transcript)")
            let prompt = try #require(transcript.range(of: "Enter password:"), "\(transcript)")
            #expect(cost.lowerBound < prompt.lowerBound)
        }
    }
}
