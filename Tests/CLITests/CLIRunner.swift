import Foundation
import Glibc
import Testing
import N11TestSupport

// Runs the built n11archive binary as a child process: posix_spawn with stdin/stdout/stderr
// opened by the child itself on files (so no pipe can fill up and deadlock, and no parent
// descriptor can leak into a test running in parallel), wait4 for the exit status and the
// child's peak RSS.

/// The binary under test: $N11_TEST_BINARY, else <package root>/.build/debug/n11archive.
let n11archiveBinary: String = {
    if let path = ProcessInfo.processInfo.environment["N11_TEST_BINARY"], !path.isEmpty { return path }
    let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()   // CLITests
        .deletingLastPathComponent()   // Tests
        .deletingLastPathComponent()   // package root
    return root.appendingPathComponent(".build/debug/n11archive").path
}()

struct RunResult: CustomStringConvertible {
    /// The exit code, or 128 + the signal number if the child was killed.
    let status: Int32
    let stdout: [UInt8]
    let stderr: [UInt8]
    /// The child's peak resident set in KiB: the largest VmHWM read from /proc/PID/status
    /// while it ran (VmHWM is a high-water mark, so only the last ~2 ms before exit can be
    /// missed); nil if it exited before the first sample.
    ///
    /// Why not ru_maxrss from wait4: glibc's posix_spawn starts the child with
    /// CLONE_VM|CLONE_VFORK, and at exec the kernel folds the old (shared, i.e. this test
    /// process's) mm's high-water mark into the child's ru_maxrss (exec_mmap →
    /// setmax_mm_hiwater_rss). With other tests running Argon2id in this process, every
    /// child then "peaks" at this process's size (e.g. 170 MiB), whatever it really used.
    let peakRSSKiB: Int?
    /// wait4's ru_maxrss, in KiB: an upper bound that includes this process's high-water mark.
    let rusageMaxRSSKiB: Int
    let arguments: [String]

    var out: String { String(decoding: stdout, as: UTF8.self) }
    var err: String { String(decoding: stderr, as: UTF8.self) }

    var description: String {
        "n11archive \(arguments.joined(separator: " ")) → exit \(status)\nstdout: \(out.prefix(2000))\nstderr: \(err.prefix(2000))"
    }
}

struct RunnerError: Error, CustomStringConvertible {
    let description: String
}

/// One test's sandbox: a private temp directory holding the n11archive home and the test's files.
final class Sandbox: @unchecked Sendable {
    let root: String
    var home: String { root + "/home" }
    var vault: String { home + "/vault" }
    private var counter = 0

    init() throws {
        root = try makeTemporaryDirectory(prefix: "n11cli-tests")
    }

    func remove() {
        _ = chmod(home, 0o700)
        try? FileManager.default.removeItem(atPath: root)
    }

    func path(_ name: String) -> String { root + "/" + name }

    private func scratchName(_ what: String) -> String {
        counter += 1
        return root + "/.run-\(counter)-\(what)"
    }

    /// Runs n11archive with `arguments`. The environment is this process's, minus N11_PIN_FILE,
    /// with N11_HOME set to this sandbox's home, then `environment` applied on top.
    /// `descriptors` are files the child opens for reading on the given descriptor numbers.
    /// `openFilesLimit` runs it under that RLIMIT_NOFILE (through util-linux's `prlimit`).
    func run(_ arguments: [String], stdin: [UInt8]? = nil, environment: [String: String] = [:],
             descriptors: [Int32: String] = [:], openFilesLimit: Int? = nil) throws -> RunResult {
        var env = ProcessInfo.processInfo.environment
        env["N11_PIN_FILE"] = nil
        env["N11_HOME"] = home
        for (key, value) in environment { env[key] = value }

        let stdinPath: String
        if let stdin {
            stdinPath = scratchName("stdin")
            try Data(stdin).write(to: URL(fileURLWithPath: stdinPath))
        } else {
            stdinPath = "/dev/null"
        }
        let stdoutPath = scratchName("stdout"), stderrPath = scratchName("stderr")
        defer {
            if stdin != nil { unlink(stdinPath) }
            unlink(stdoutPath)
            unlink(stderrPath)
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdinPath, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        for (fd, path) in descriptors.sorted(by: { $0.key < $1.key }) {
            posix_spawn_file_actions_addopen(&actions, fd, path, O_RDONLY, 0)
        }

        let wrapper = openFilesLimit.map { ["/usr/bin/prlimit", "--nofile=\($0)", "--"] } ?? []
        let program = wrapper.first ?? n11archiveBinary
        let argv = (wrapper + [n11archiveBinary] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }

        // A session of its own: the child has no controlling terminal, as under cron, so a
        // test behaves the same run from a terminal or from CI (prompts go to /dev/tty).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, 0x80)   // POSIX_SPAWN_SETSID (glibc; not exported to Swift)
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, program, &actions, &attributes, argv, envp)
        guard rc == 0 else {
            throw RunnerError(description: "cannot start \(program): \(String(cString: strerror(rc))) — build it first, or set N11_TEST_BINARY")
        }

        // Wait, sampling the child's VmHWM until it exits (see `RunResult.peakRSSKiB`).
        var status: Int32 = 0
        var usage = rusage()
        var peak: Int? = nil
        while true {
            let r = wait4(pid, &status, WNOHANG, &usage)
            if r == pid { break }
            if r < 0 {
                guard errno == EINTR else { throw RunnerError(description: "wait4 failed: errno \(errno)") }
                continue
            }
            if let hwm = highWaterMarkKiB(of: pid) { peak = max(peak ?? 0, hwm) }
            usleep(2_000)
        }
        let signal = status & 0x7f
        let code = signal == 0 ? (status >> 8) & 0xff : 128 + signal

        let out = Array((try? Data(contentsOf: URL(fileURLWithPath: stdoutPath))) ?? Data())
        let err = Array((try? Data(contentsOf: URL(fileURLWithPath: stderrPath))) ?? Data())
        return RunResult(status: code, stdout: out, stderr: err, peakRSSKiB: peak,
                         rusageMaxRSSKiB: Int(usage.ru_maxrss), arguments: arguments)
    }
}

/// VmHWM of a running process, in KiB; nil once it has exited (a zombie has no memory).
func highWaterMarkKiB(of pid: pid_t) -> Int? {
    let fd = open("/proc/\(pid)/status", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 8192)
    var length = 0
    while length < buffer.count {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + length, $0.count - length) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { break }
        length += n
    }
    let text = String(decoding: buffer[0..<length], as: UTF8.self)
    guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return nil }
    return Int(line.dropFirst("VmHWM:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
}

/// Runs `body` in a fresh sandbox, removed afterwards.
func withSandbox<T>(_ body: (Sandbox) throws -> T) throws -> T {
    let sandbox = try Sandbox()
    defer { sandbox.remove() }
    return try body(sandbox)
}

// MARK: file helpers (the rest come from N11TestSupport)

func writeText(_ text: String, to path: String) throws {
    try writeBytes(Array(text.utf8), to: path)
}

/// An upper-case UUID as `UUID().uuidString` writes it.
func isUUID(_ text: String) -> Bool {
    UUID(uuidString: text) != nil && text == text.uppercased() && text.count == 36
}

/// Runs `sh -c command` to its end: its stdout and stderr together, and its exit status.
func runShell(_ command: String, environment: [String: String]? = nil) throws -> (output: String, status: Int32) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", command]
    if let environment { process.environment = environment }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()   // drained before waiting
    process.waitUntilExit()
    return (String(decoding: data, as: UTF8.self), process.terminationStatus)
}
