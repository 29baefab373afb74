internal import CLinux
import Glibc

/// A command run with `/bin/sh -c` whose standard output we read through a pipe (its stdin
/// is /dev/null, its stderr ours, so a helper can still talk to the user). Used for
/// `--password-command`: the caller reads what it needs — the first line — and then
/// `finish`es, which never waits for the end of the output: a helper such as `yes pw`, or
/// one that leaves a child holding its stdout open, must not hang us.
public final class ShellCommand {
    public let command: String
    /// Our end of the command's standard output.
    public let output: FileDescriptor
    private let pid: pid_t
    private var reaped = false

    /// How a finished command ended.
    public enum Ending: Equatable, Sendable {
        /// It exited with this status.
        case exited(Int32)
        /// A signal ended it: SIGPIPE once we stopped reading, say.
        case signaled(Int32)
        /// It was still running when the grace period ended, and was killed (SIGKILL).
        case killedAfterGracePeriod
    }

    private init(command: String, output: FileDescriptor, pid: pid_t) {
        self.command = command
        self.output = output
        self.pid = pid
    }

    /// Starts `command`. Throws if the shell cannot be started.
    public static func start(_ command: String) throws -> ShellCommand {
        var fds: [Int32] = [-1, -1]
        guard n11_pipe_cloexec(&fds) == 0 else { throw SystemError("cannot create a pipe for", path: command) }
        let (readEnd, writeEnd) = (fds[0], fds[1])
        defer { Glibc.close(writeEnd) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 1)   // dup2 clears O_CLOEXEC on fd 1

        let words: [String] = ["/bin/sh", "-c", command]
        let arguments: [UnsafeMutablePointer<CChar>?] = words.map { word in word.withCString { strdup($0) } }
        defer { arguments.forEach { free($0) } }
        var argv = arguments + [nil]
        var pid: pid_t = 0
        let rc = SpawnAttributes.withDefaultSignals { posix_spawn(&pid, "/bin/sh", &actions, $0, &argv, environ) }
        guard rc == 0 else {
            Glibc.close(readEnd)
            throw SystemError("cannot run /bin/sh for", path: command, errno: rc)
        }
        return ShellCommand(command: command, output: FileDescriptor(adopting: readEnd, path: "the output of '\(command)'"), pid: pid)
    }

    /// Stops reading (closing our end, so a writer gets SIGPIPE instead of blocking), then
    /// waits up to `gracePeriod` seconds for the command to end and kills it if it has not.
    /// Bounded whatever the command does; its own children are not waited for.
    public func finish(gracePeriod: Double) -> Ending {
        try? output.close()
        let deadline = monotonicSeconds() + gracePeriod
        while true {
            if let ending = reap(blocking: false) { return ending }
            if monotonicSeconds() >= deadline { break }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        _ = reap(blocking: true)
        return .killedAfterGracePeriod
    }

    deinit { if !reaped { _ = finish(gracePeriod: 0) } }

    private func reap(blocking: Bool) -> Ending? {
        var status: Int32 = 0
        while true {
            let rc = waitpid(pid, &status, blocking ? 0 : WNOHANG)
            if rc == pid { break }
            if rc == 0 { return nil }
            if errno == EINTR { continue }
            reaped = true   // ECHILD: someone else reaped it; nothing to wait for
            return .exited(-1)
        }
        reaped = true
        // <sys/wait.h>'s macros, which Swift does not import: the low 7 bits are the signal
        // (0: a normal exit, whose status is in the next byte).
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signaled(signal)
    }

    private func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
