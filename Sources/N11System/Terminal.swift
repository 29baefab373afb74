import Glibc

/// Terminal control for secret prompts: echo off while the user types, always restored.
public enum Terminal {
    public static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

    /// Opens the controlling terminal for a prompt (so prompts work even with stdin redirected).
    public static func openControlling() -> FileDescriptor? {
        let fd = Glibc.open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        return fd >= 0 ? FileDescriptor(adopting: fd, path: "/dev/tty") : nil
    }

    /// Runs `body` with echo turned off on `fd`, restoring the old settings afterwards.
    public static func withEchoDisabled<T, E: Error>(_ fd: Int32, _ body: () throws(E) -> T) throws(E) -> T {
        var saved = termios()
        guard tcgetattr(fd, &saved) == 0 else { return try body() }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        quiet.c_lflag |= tcflag_t(ECHONL)
        _ = tcsetattr(fd, TCSAFLUSH, &quiet)
        defer { _ = tcsetattr(fd, TCSAFLUSH, &saved) }
        return try body()
    }
}
