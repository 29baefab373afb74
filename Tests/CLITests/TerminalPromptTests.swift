import Foundation
import Glibc
import Testing
import N11TestSupport

/// Runs `n11archive ARGS` on a real pseudo-terminal (util-linux `script`), typing `lines`
/// one by one, each after a pause (the prompt flushes type-ahead, as getpass does).
/// Returns the terminal's transcript and the exit status.
func runOnTerminal(_ arguments: [String], typing lines: [String], home: String) throws -> (String, Int32) {
    try runShellOnTerminal((["$N11"] + arguments.map { "'\($0)'" }).joined(separator: " "), typing: lines, home: home)
}

/// Runs a shell command line on a pseudo-terminal (util-linux `script`), typing `lines`
/// one by one, each after a pause; `$N11` in it is the binary under test.
func runShellOnTerminal(_ commandLine: String, typing lines: [String], home: String) throws -> (String, Int32) {
    // Typed only once the prompt is surely up (echo off): on a loaded machine (CI, two
    // cores, the whole suite at once) the tool can take well over a second to get there,
    // and a line typed earlier is echoed and read as the wrong answer.
    let typing = lines.enumerated().map { "sleep \($0.offset == 0 ? "3" : "1.5"); printf '%s\\n' '\($0.element)'" }
        .joined(separator: "; ")
    let escaped = commandLine.replacingOccurrences(of: "\"", with: "\\\"")
    return try runShell("(\(typing.isEmpty ? "true" : typing); sleep 0.8) | script -qec \"\(escaped)\" /dev/null",
                        environment: ["N11_HOME": home, "PATH": "/usr/bin:/bin", "TERM": "dumb", "N11": n11archiveBinary])
}

@Suite("Terminal prompts", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script"),
                                      "needs util-linux script for a pseudo-terminal"))
struct TerminalPromptTests {
    @Test("init --pin on a terminal asks twice without echo; the PIN then unlocks the key store")
    func pinPrompt() throws {
        try withSandbox { s in
            let (transcript, _) = try runOnTerminal(["init", "--pin"], typing: ["86420975", "86420975"], home: s.home)
            #expect(transcript.contains("Enter PIN:") && transcript.contains("Repeat PIN:"), "\(transcript)")
            #expect(!transcript.contains("86420975"), "the PIN was echoed: \(transcript)")
            #expect(transcript.contains("PIN-protected"), "\(transcript)")
            expectExit(try s.run(["vault", "list", "--pin-file", try s.file("pin", Array("86420975\n".utf8))]), 0)
            expectExit(try s.run(["vault", "list", "--pin-file", try s.file("bad", Array("86420976\n".utf8))]), 77)
        }
    }

    @Test("a key file's passphrase prompt names the file")
    func passphrasePromptNamesTheFile() throws {
        try withSandbox { s in
            try s.initialize()
            expectExit(try s.run(["key", "generate"]), 0)
            let key = s.path("backup.key")
            let (transcript, _) = try runOnTerminal(["key", "export-private", "-o", key],
                                                    typing: ["a long passphrase", "a long passphrase"], home: s.home)
            #expect(transcript.contains("Enter passphrase for '\(key)':"), "\(transcript)")
            #expect(exists(key), "\(transcript)")
        }
    }

    @Test("a wrong password or key passphrase typed on a terminal gets two more tries on the same archive; three wrong end with 77")
    func retries() throws {
        try withSandbox { s in
            try s.initialize()
            expectExit(try s.run(["vault", "add", try s.file("a.jpg", [1, 2, 3])]), 0)
            let archive = s.path("t.nu11vlt")
            let password = try s.file("pw", Array("tty password\n".utf8))
            chmod(password, 0o600)
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", password] + fastKDF), 0)
            let (second, okStatus) = try runOnTerminal(["verify", archive], typing: ["typo", "tty password"], home: s.home)
            #expect(okStatus == 0, "\(second)")
            #expect(second.contains("wrong password; try again (2 tries left)") && second.contains("ok:"), "\(second)")
            let (never, status) = try runOnTerminal(["verify", archive], typing: ["typo 1", "typo 2", "typo 3"], home: s.home)
            #expect(status == 77, "\(never)")
            #expect(never.contains("(1 try left)") && never.contains("wrong password for"), "\(never)")
            // prune too: nothing is deleted before the newest verified, so it starts again.
            let backups = s.path("backups")
            #expect(mkdir(backups, 0o700) == 0)
            for _ in 0..<2 {
                expectExit(try s.run(["create", "--portable", "--output-dir", backups, "--password-file", password] + fastKDF), 0)
                usleep(1_050_000)
            }
            let (pruned, pruneStatus) = try runOnTerminal(["prune", backups, "--keep-last", "1"], typing: ["typo", "tty password"], home: s.home)
            #expect(pruneStatus == 0, "\(pruned)")
            #expect(pruned.contains("wrong password; try again (2 tries left)") && pruned.contains("1 kept, 1 deleted"), "\(pruned)")

            // An identity's passphrase, for an archive made for its public key alone.
            expectExit(try s.run(["key", "generate"]), 0)
            let key = s.path("backup.key")
            expectExit(try s.run(["key", "export-private", "-o", key, "--passphrase-file", try s.passphraseFile()]), 0)
            let pub = try s.file("backup.pub", Array(try s.run(["key", "export-public"]).stdout))
            let forKey = s.path("k.nu11vlt")
            expectExit(try s.run(["create", "--portable", "--recipient", pub, "-o", forKey]), 0)
            let (opened, openedStatus) = try runOnTerminal(["verify", forKey, "--identity", key], typing: ["not it", "a long passphrase"],
                                                           home: s.path("elsewhere"))
            #expect(openedStatus == 0, "\(opened)")
            #expect(opened.contains("wrong passphrase for '\(key)'; try again (2 tries left)"), "\(opened)")
        }
    }

    @Test("two different PINs create nothing")
    func pinMismatch() throws {
        try withSandbox { s in
            let (transcript, _) = try runOnTerminal(["init", "--pin"], typing: ["86420975", "86420974"], home: s.home)
            #expect(transcript.contains("differ"), "\(transcript)")
            #expect(!exists(s.home + "/keystore.n11keys"))
        }
    }

    @Test("create --portable on a terminal asks for the password twice without echo; verify asks once")
    func passwordPrompt() throws {
        try withSandbox { s in
            try s.initialize()
            expectExit(try s.run(["vault", "add", try s.file("a.jpg", [1, 2, 3])]), 0)
            let archive = s.path("t.nu11vlt")
            let (made, _) = try runOnTerminal(["create", "--portable", "-o", archive] + fastKDF,
                                              typing: ["tty password", "tty password"], home: s.home)
            #expect(made.contains("Enter password:") && made.contains("Repeat password:"), "\(made)")
            #expect(!made.contains("tty password"), "the password was echoed: \(made)")
            #expect(exists(archive), "\(made)")
            let (checked, _) = try runOnTerminal(["verify", archive], typing: ["tty password"], home: s.home)
            #expect(checked.contains("ok:"), "\(checked)")
            #expect(!checked.contains("Repeat"), "verify asks once: \(checked)")
            // The same password from a file opens it too: the prompt adds nothing to the bytes.
            expectExit(try s.run(["verify", archive, "--password-file", try s.file("pw", Array("tty password\n".utf8))]), 0)
        }
    }

    /// Runs `init --pin` on a pseudo-terminal (Python's pty), waits for the prompt, types
    /// Ctrl-C, and reports how the tool ended and whether the terminal echoes again.
    static let interruptProbe = """
    import os, pty, select, signal, sys, time, termios
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(sys.argv[1], [sys.argv[1], "init", "--pin"])
    seen, deadline = b"", time.time() + 60
    while b"Enter PIN:" not in seen and time.time() < deadline:
        if select.select([fd], [], [], 1)[0]:
            seen += os.read(fd, 1024)
    if b"Enter PIN:" in seen:
        time.sleep(0.3)
        os.write(fd, b"\\x03")
    else:
        os.kill(pid, signal.SIGKILL)
    done, status, deadline = 0, 0, time.time() + 30
    while not done and time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    if not done:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        status = 0
    echo = bool(termios.tcgetattr(fd)[3] & termios.ECHO)
    print(f"prompted={b'Enter PIN:' in seen} signal={os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0} echo={echo} seen={seen!r}")
    """

    @Test("Ctrl-C at a prompt ends the tool by SIGINT with echo back on and nothing created")
    func interruptedPrompt() throws {
        try withSandbox { s in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-c", Self.interruptProbe, n11archiveBinary]
            process.environment = ["N11_HOME": s.home, "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let report = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(report.contains("prompted=True signal=2 echo=True"), "\(report)")
            #expect(!exists(s.home + "/keystore.n11keys"))
        }
    }
}

extension TerminalPromptTests {
    @Test("init --pin on a terminal refuses a short PIN right after it is typed, before asking to repeat it")
    func shortPINRefusedAtOnce() throws {
        try withSandbox { s in
            let (transcript, status) = try runOnTerminal(["init", "--pin"], typing: ["1234", "1234"], home: s.home)
            #expect(status == 64, "\(transcript)")
            #expect(transcript.contains("8 characters") && !transcript.contains("Repeat PIN:"), "\(transcript)")
            #expect(!exists(s.home + "/keystore.n11keys"))
        }
    }
}
