internal import CLinux
import Glibc

/// A program run without a shell (posix_spawnp, so PATH is searched): its stdin is
/// /dev/null or a pipe we write (`standardInput`), its stdout a pipe we read, its stderr an anonymous in-memory file (memfd) read
/// once it has ended (two pipes read by one thread can deadlock). Used to drive `rclone`.
/// Sendable: `errorTail` (pread on its own descriptor) may run on another thread while the
/// owner waits; nothing else is shared.
public final class ChildProcess: @unchecked Sendable {
    public let arguments: [String]
    /// Our end of the program's standard output.
    public let output: FileDescriptor
    /// Our end of its standard input, when it was started with one (else it reads /dev/null).
    /// Written from one thread; `closeInput` tells the program the input ended.
    public let input: FileDescriptor?
    private let errorFile: FileDescriptor
    private let pid: pid_t
    private var reaped = false
    /// The raw status waitpid gave once the program was reaped.
    private var waitStatus: Int32 = 0
    /// Ends the program if Ctrl-C or SIGTERM ends us first: a child is not in our process
    /// group's signal when someone kills only us (cron, systemd, `kill PID`), and an upload
    /// left running would finish what the interrupted command was taking back.
    private var interruptCleanup: Interruption.Token?

    public struct Outcome: Sendable {
        /// The exit status, or 128 + the signal that ended it.
        public let status: Int32
        /// The end of its standard error (at most 64 KiB), for messages.
        public let errorText: String
    }

    private init(arguments: [String], output: FileDescriptor, input: FileDescriptor?, errorFile: FileDescriptor, pid: pid_t) {
        self.arguments = arguments
        self.output = output
        self.input = input
        self.errorFile = errorFile
        self.pid = pid
    }

    /// Starts `arguments[0]` (found on PATH) with `arguments`, and `environment` added to ours;
    /// with `standardInput`, its standard input is a pipe we write (`input`). Throws a
    /// SystemError with ENOENT if there is no such program.
    public static func start(_ arguments: [String], environment: [String: String] = [:],
                             standardInput: Bool = false) throws -> ChildProcess {
        precondition(!arguments.isEmpty)
        var fds: [Int32] = [-1, -1]
        guard n11_pipe_cloexec(&fds) == 0 else { throw SystemError("cannot create a pipe for", path: arguments[0]) }
        let (readEnd, writeEnd) = (fds[0], fds[1])
        defer { Glibc.close(writeEnd) }
        var inputFDs: [Int32] = [-1, -1]
        if standardInput {
            guard n11_pipe_cloexec(&inputFDs) == 0 else {
                Glibc.close(readEnd)
                throw SystemError("cannot create a pipe for", path: arguments[0])
            }
        }
        // The program's end of its input is ours to close once it has it; ours stays open.
        defer { if inputFDs[0] >= 0 { Glibc.close(inputFDs[0]) } }
        let errorFD = n11_memfd_cloexec("n11archive-child-stderr")
        guard errorFD >= 0 else {
            Glibc.close(readEnd)
            if inputFDs[1] >= 0 { Glibc.close(inputFDs[1]) }
            throw SystemError("cannot create a file for the errors of", path: arguments[0])
        }
        let errorFile = FileDescriptor(adopting: errorFD, path: "the errors of \(arguments[0])")

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if standardInput {
            posix_spawn_file_actions_adddup2(&actions, inputFDs[0], 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 1)
        posix_spawn_file_actions_adddup2(&actions, errorFD, 2)

        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var merged: [String: String] = [:]
        var index = 0
        while let entry = environ[index] {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") { merged[String(text[..<equals])] = String(text[text.index(after: equals)...]) }
            index += 1
        }
        for (key, value) in environment { merged[key] = value }
        let envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = SpawnAttributes.withDefaultSignals { posix_spawnp(&pid, arguments[0], &actions, $0, argv, envp) }
        guard rc == 0 else {
            Glibc.close(readEnd)
            if inputFDs[1] >= 0 { Glibc.close(inputFDs[1]) }
            throw SystemError("cannot run", path: arguments[0], errno: rc)
        }
        let input = standardInput ? FileDescriptor(adopting: inputFDs[1], path: "the input of \(arguments[0])") : nil
        let child = ChildProcess(arguments: arguments, output: FileDescriptor(adopting: readEnd, path: "the output of \(arguments[0])"),
                                 input: input, errorFile: errorFile, pid: pid)
        child.interruptCleanup = Interruption.onInterrupt { Self.end(pid) }
        return child
    }

    /// SIGTERM, up to two seconds for it to exit, then SIGKILL. Never reaps (the owner's
    /// waitpid may be running on another thread): WNOWAIT only looks.
    private static func end(_ pid: pid_t) {
        kill(pid, SIGTERM)
        for _ in 0..<200 {
            if n11_child_exited(pid) != 0 { return }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
    }

    /// Runs to the end, collecting at most `outputLimit` bytes of standard output (the rest is
    /// read and dropped, so the program never blocks on a full pipe).
    public static func run(_ arguments: [String], environment: [String: String] = [:],
                           outputLimit: Int = 16 << 20) throws -> (Outcome, [UInt8]) {
        let child = try start(arguments, environment: environment)
        var collected: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = try child.output.read(into: &buffer, count: buffer.count)
            if n == 0 { break }
            if collected.count < outputLimit { collected.append(contentsOf: buffer[0..<min(n, outputLimit - collected.count)]) }
        }
        return (child.wait(), collected)
    }

    /// Tells the program its input has ended (it reads end-of-file). Safe to call twice.
    public func closeInput() {
        try? input?.close()
    }

    /// Asks the program to end (SIGTERM; with `force`, SIGKILL) without waiting or reaping: for another thread to
    /// unblock the owner, which is writing to `input` or waiting. Only while the owner has not
    /// reaped it (its PID could be another process's after that).
    public func askToEnd(force: Bool = false) {
        kill(pid, force ? SIGKILL : SIGTERM)
    }

    /// Waits for the program to end (closing our ends of its output and input first).
    public func wait() -> Outcome {
        try? output.close()
        closeInput()
        if !reaped {
            // Exited but not reaped: its PID cannot be reused yet, so the Ctrl-C cleanup is
            // cancelled while a signal from it can still only reach this program.
            _ = n11_wait_child_exit(pid)
            if let interruptCleanup { Interruption.cancel(interruptCleanup) }
            while waitpid(pid, &waitStatus, 0) < 0 && errno == EINTR {}
            reaped = true
        }
        // Kept, so that a second wait (after `terminate`, say) tells the same.
        let status = waitStatus
        let signal = status & 0x7F
        let code = signal == 0 ? (status >> 8) & 0xFF : 128 + signal
        var text: [UInt8] = []
        if let size = try? errorFile.status().size {
            let start = max(0, size - 65536)
            var buffer = [UInt8](repeating: 0, count: Int(size - start))
            if let n = try? errorFile.read(into: &buffer, count: buffer.count, at: start) { text = Array(buffer.prefix(n)) }
        }
        return Outcome(status: code, errorText: String(decoding: text, as: UTF8.self))
    }

    /// The last `count` bytes its standard error holds so far (it may still be writing):
    /// how a caller follows a program's progress reports.
    public func errorTail(_ count: Int = 4096) -> String {
        guard let size = try? errorFile.status().size, size > 0 else { return "" }
        let start = max(0, size - Int64(count))
        var buffer = [UInt8](repeating: 0, count: Int(size - start))
        guard let n = try? errorFile.read(into: &buffer, count: buffer.count, at: start) else { return "" }
        return String(decoding: buffer.prefix(n), as: UTF8.self)
    }

    /// Ends the program at once (SIGTERM, then SIGKILL) and reaps it.
    public func terminate() {
        guard !reaped else { return }
        kill(pid, SIGTERM)
        usleep(200_000)
        kill(pid, SIGKILL)
        _ = wait()
    }

    deinit { if !reaped { terminate() } }

    /// Makes a write to a pipe whose reader has gone fail with EPIPE on the calling thread,
    /// instead of SIGPIPE ending the whole process: for the thread that feeds a program's
    /// `input` (the program may fail at any time). The signal stays pending on that thread
    /// and is dropped when it exits, so call this only on a thread of its own.
    public static func blockBrokenPipeSignalOnThisThread() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }
}
