import Foundation
import Glibc
import Testing
import N11TestSupport

// The messages of the common failures, pinned: each says what failed, on which file or item,
// and what to do next (the `hint:` line), with the README's exit code. Other suites check
// that these failures change nothing; this one holds the wording people and scripts see.

/// One common failure: how to cause it in a sandbox, and what the user must be told.
enum CommonFailure: String, CaseIterable, CustomStringConvertible {
    case missingArchive, missingPasswordFile, missingInputFile, wrongPassword, damagedArchive, outputExists,
         exportConflicts, notInitialised, unsafeKeyStorePermissions, busyLock, unknownItemID,
         noPasswordSource, weakPassword

    var description: String { rawValue }

    /// Exit code, then phrases the output must contain (`$ROOT` stands for the sandbox).
    var expected: (code: Int32, phrases: [String]) {
        switch self {
        case .missingArchive:
            return (66, ["error: '$ROOT/missing.nu11vlt' does not exist", "hint: check the archive's path and name; nothing was changed"])
        case .missingPasswordFile:
            return (66, ["error: cannot read the password file '$ROOT/no-such-pw'", "hint: check the path given with --password-file (or $N11_PASSWORD_FILE)"])
        case .missingInputFile:
            return (66, ["error: '$ROOT/no-such.jpg' does not exist", "hint: check the path; nothing was added"])
        case .wrongPassword:
            return (77, ["error: wrong password for '$ROOT/a.nu11vlt'", "hint: check the password; an archive's password cannot be recovered"])
        case .damagedArchive:
            return (65, ["error: '$ROOT/a.nu11vlt' is damaged or was tampered with", "hint: use another copy of the archive; nothing was written"])
        case .outputExists:
            return (73, ["error: '$ROOT/a.nu11vlt' already exists; nothing was written", "hint: pass --force to replace it, or choose another path"])
        case .exportConflicts:
            return (73, ["already exist in the export directory ('$ROOT/export/", "nothing was exported",
                         "hint: export into an empty directory, or pass --overwrite"])
        case .notInitialised:
            return (78, ["error: no key store in '$ROOT/home'", "hint: run `n11archive init` first, or point --home at an existing key store"])
        case .unsafeKeyStorePermissions:
            return (78, ["error: permissions 0644 on '$ROOT/home/keystore.n11keys' are too open; run: chmod 0600 '$ROOT/home/keystore.n11keys'"])
        case .busyLock:
            return (75, ["error: process 424242 is using this vault or key store (lock '$ROOT/home/vault/.lock')",
                         "hint: wait for it to finish, or pass --lock-wait SECONDS"])
        case .unknownItemID:
            return (66, ["error: no item 'ABCDEF12' in the vault '$ROOT/home/vault'", "hint: `n11archive vault list` shows the IDs"])
        case .noPasswordSource:
            return (64, ["error: a portable archive needs a password and there is no terminal to ask for it",
                         "hint: give it with --password-file FILE (mode 0600), --password-fd N, --password-command CMD or N11_PASSWORD_FILE"])
        case .weakPassword:
            return (64, ["error: the password is too weak for a portable archive: estimated 28 bits (Weak); nothing was written",
                         "hint: use a longer password (e.g. from `n11archive password generate -o FILE`), or pass --allow-weak-password"])
        }
    }

    /// Brings the sandbox to the point of failure and runs the failing command.
    func provoke(_ s: Sandbox) throws -> RunResult {
        let archive = s.path("a.nu11vlt")
        switch self {
        case .missingArchive:
            return try s.run(["verify", s.path("missing.nu11vlt"), "--password-file", try s.passwordFile()])
        case .missingPasswordFile:
            try s.initialize()
            return try s.run(["create", "--portable", "-o", archive, "--password-file", s.path("no-such-pw")] + fastKDF)
        case .missingInputFile:
            try s.initialize()
            return try s.run(["vault", "add", s.path("no-such.jpg")])
        case .wrongPassword:
            try Self.archive(s, archive)
            return try s.run(["verify", archive, "--password-file", try s.passwordFile("wrong horse battery staple\n", name: "wrong")])
        case .damagedArchive:
            try Self.archive(s, archive)
            var bytes = try readBytes(archive)
            bytes[bytes.count / 2] ^= 0x01
            try writeBytes(bytes, to: archive)
            return try s.run(["verify", archive, "--password-file", try s.passwordFile()])
        case .outputExists:
            try Self.archive(s, archive)
            return try s.run(["create", "--portable", "-o", archive, "--password-file", try s.passwordFile()] + fastKDF)
        case .exportConflicts:
            try Self.archive(s, archive)
            let args = ["restore", archive, "--password-file", try s.passwordFile(), "--export", s.path("export")]
            expectExit(try s.run(args), 0)
            // A file that differs from the archive's (an identical one would be skipped).
            for folder in ["Photos", "Notes"] {
                for name in listing(of: s.path("export/" + folder)) { try writeBytes([0x21], to: s.path("export/\(folder)/\(name)")) }
            }
            return try s.run(args)
        case .notInitialised:
            return try s.run(["vault", "list"])
        case .unsafeKeyStorePermissions:
            try s.initialize()
            #expect(chmod(s.home + "/keystore.n11keys", 0o644) == 0)
            return try s.run(["vault", "list"])
        case .busyLock:
            try s.initialize()
            // Held by this test process, recording a made-up PID as the holder.
            let fd = open(s.vault + "/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            defer { close(fd) }
            #expect(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
            let pid = Array("424242\n".utf8)
            #expect(ftruncate(fd, 0) == 0 && pwrite(fd, pid, pid.count, 0) == pid.count)
            return try s.run(["vault", "add", try s.file("b.jpg", [1, 2, 3])])
        case .unknownItemID:
            try s.initialize()
            return try s.run(["vault", "cat", "ABCDEF12"])
        case .noPasswordSource:
            try Self.archive(s, archive)
            return try s.run(["verify", archive])   // stdin is /dev/null: no terminal
        case .weakPassword:
            try s.initialize()
            return try s.run(["create", "--portable", "-o", archive, "--password-file", try s.passwordFile("hunter\n", name: "weak")] + fastKDF)
        }
    }

    /// An initialised home with one photo and a portable archive of it at `path`.
    static func archive(_ s: Sandbox, _ path: String) throws {
        try s.initialize()
        expectExit(try s.run(["vault", "add", try s.file("a.jpg", Array(repeating: 7, count: 5000))]), 0)
        expectExit(try s.run(["create", "--portable", "-o", path, "--password-file", try s.passwordFile()] + fastKDF), 0)
    }
}

@Suite("n11archive CLI: error messages")
struct MessageTests {
    @Test("each common failure names what failed and where, says what to do, and exits with its code",
          arguments: CommonFailure.allCases)
    func message(_ failure: CommonFailure) throws {
        try withSandbox { s in
            let result = try failure.provoke(s)
            let (code, phrases) = failure.expected
            expectExit(result, code)
            for phrase in phrases {
                let expected = phrase.replacingOccurrences(of: "$ROOT", with: s.root)
                #expect(result.err.contains(expected), "missing '\(expected)' in: \(result)")
            }
            #expect(result.err.split(separator: "\n").filter { $0.hasPrefix("n11archive: error: ") }.count == 1, "\(result)")
            #expect(result.out.isEmpty, "a failure printed a result: \(result)")
        }
    }
}
