import Glibc

/// Terminal control for secret prompts: echo off while the user types, always restored,
/// even when the prompt is interrupted by Ctrl-C, SIGTERM or a hang-up.
public enum Terminal {
    public static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

    /// The width of the terminal on `fd` now (it may be resized between two calls), or nil.
    public static func columns(_ fd: Int32) -> Int? {
        var size = winsize()
        guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }

    /// Whether this process has a controlling terminal to prompt on.
    public static func hasControlling() -> Bool {
        guard let tty = openControlling() else { return false }
        try? tty.close()
        return true
    }

    /// Opens the controlling terminal for a prompt (so prompts work even with stdin redirected).
    public static func openControlling() -> FileDescriptor? {
        let fd = Glibc.open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        return fd >= 0 ? FileDescriptor(adopting: fd, path: "/dev/tty") : nil
    }

    /// The settings to put back if a signal ends the process mid-prompt. Written only by the
    /// main thread around a prompt, read by the signal handler.
    nonisolated(unsafe) static var pending: (fd: Int32, settings: termios)?
    static let interruptions = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    /// Runs `body` with echo turned off on `fd`, restoring the old settings afterwards.
    public static func withEchoDisabled<T, E: Error>(_ fd: Int32, _ body: () throws(E) -> T) throws(E) -> T {
        var saved = termios()
        guard tcgetattr(fd, &saved) == 0 else { return try body() }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        quiet.c_lflag |= tcflag_t(ECHONL)
        pending = (fd, saved)
        let previous = interruptions.map { signal($0, restoreAndDie) }
        // A signal mask is inherited across exec (a parent's worker thread may have blocked
        // everything): a prompt must still be interruptible, so unblock these while it runs.
        var interruptible = sigset_t(), previousMask = sigset_t()
        sigemptyset(&interruptible)
        for signalNumber in interruptions { sigaddset(&interruptible, signalNumber) }
        pthread_sigmask(SIG_UNBLOCK, &interruptible, &previousMask)
        _ = tcsetattr(fd, TCSAFLUSH, &quiet)
        defer {
            _ = tcsetattr(fd, TCSAFLUSH, &saved)
            pthread_sigmask(SIG_SETMASK, &previousMask, nil)
            for (signalNumber, handler) in zip(interruptions, previous) { signal(signalNumber, handler) }
            pending = nil
        }
        return try body()
    }
}

extension Terminal {
    /// Puts back a terminal whose echo a prompt turned off (`Interruption`'s thread, before
    /// it cleans up and the process ends).
    static func restoreAfterInterruption() {
        guard var state = pending else { return }
        _ = tcsetattr(state.fd, TCSANOW, &state.settings)
        _ = write(state.fd, "\n", 1)
    }
}

/// Puts the terminal back, then lets the signal do what it would have done.
private func restoreAndDie(_ signalNumber: Int32) {
    if var state = Terminal.pending {
        _ = tcsetattr(state.fd, TCSANOW, &state.settings)
        _ = write(state.fd, "\n", 1)
    }
    signal(signalNumber, SIG_DFL)
    raise(signalNumber)
}
