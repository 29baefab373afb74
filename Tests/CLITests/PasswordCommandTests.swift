import Foundation
import Glibc
import Testing
import N11TestSupport

/// `--password-command` takes the first line and does not wait for the end of the output:
/// a helper that never stops writing, or leaves a child holding its output, or lingers
/// after printing, must not hang a nightly job.
@Suite("--password-command: the first line, then a bounded wait")
struct PasswordCommandTests {
    /// Runs the binary, killing it if it is still running after `limit` seconds. Spawned
    /// and reaped by PID (Foundation's Process would wait for descriptors that a helper's
    /// lingering child inherited).
    func runWithWatchdog(_ s: Sandbox, _ args: [String], limit: Double = 20) throws -> (status: Int32, timedOut: Bool) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in [0, 1, 2] { posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0) }
        let words = [n11archiveBinary] + args
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { word in word.withCString { strdup($0) } } + [nil]
        defer { argv.forEach { free($0) } }
        let env: [UnsafeMutablePointer<CChar>?] = ["N11_HOME=\(s.home)", "PATH=/usr/bin:/bin"].map { word in word.withCString { strdup($0) } } + [nil]
        defer { env.forEach { free($0) } }
        var pid: pid_t = 0
        try #require(posix_spawn(&pid, n11archiveBinary, &actions, nil, argv, env) == 0)
        let deadline = Date().addingTimeInterval(limit)
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            if Date() >= deadline {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                return (-1, true)
            }
            usleep(20_000)
        }
        return ((status >> 8) & 0xFF, false)
    }

    @Test("yes, a lingering child holding the output, and a helper that sleeps after printing all unlock promptly")
    func boundedHelpers() throws {
        try withSandbox { s in
            try s.initialize()
            expectExit(try s.run(["vault", "add", try s.file("a.jpg", randomBytes(500))]), 0)
            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            let password = "correct horse battery staple"
            for helper in ["yes '\(password)'",
                           "echo '\(password)'; sleep 60 &",
                           "echo '\(password)'; sleep 60"] {
                let run = try runWithWatchdog(s, ["verify", archive, "--password-command", helper])
                #expect(!run.timedOut, "verify hung on the password command \(helper)")
                #expect(run.status == 0, "verify with \(helper) exited \(run.status)")
            }
            // A wrong first line is still wrong (77); a failing helper gave no password at all,
            // a usage problem like a missing password file (64), not a wrong password.
            #expect(try runWithWatchdog(s, ["verify", archive, "--password-command", "yes nope"]).status == 77)
            #expect(try runWithWatchdog(s, ["verify", archive, "--password-command", "false"]).status == 64)
        }
    }
}
