import Glibc

/// Ctrl-C, SIGTERM and SIGHUP take back what the run made instead of leaving it behind:
/// hidden temp files of an archive being written, a vault's or an export's staging, and on
/// a fresh home the key store and vault a restore created.
///
/// `install()` blocks those signals before any other thread exists (every thread inherits
/// the mask) and starts one thread that waits for them with sigwait. That thread is an
/// ordinary thread, so the cleanups it runs may allocate, open directories and take locks,
/// which a signal handler may not. It waits for any critical section the main thread is in
/// (a commit that must not be cut in half) and for every `alongside` section (files being
/// created, on the writer thread or the caller's), runs the registered cleanups newest
/// first, then lets the signal end the process as it would have (the shell sees "killed by
/// SIGINT").
///
/// Children started with `SpawnAttributes` get the default signal mask back, so Ctrl-C
/// reaches them as usual.
public enum Interruption {
    public static let signals = [SIGINT, SIGTERM, SIGHUP]

    /// A registered cleanup, removed with `cancel(_:)` once its work was published or undone.
    public struct Token: Hashable, Sendable { let id: Int }

    nonisolated(unsafe) private static var cleanups: [(id: Int, action: () -> Void)] = []
    nonisolated(unsafe) private static var nextID = 0
    nonisolated(unsafe) private static var installed = false
    /// Guards `cleanups` and marks critical sections: the waiting thread takes it before it
    /// cleans up, so it never runs in the middle of one.
    nonisolated(unsafe) private static let lock: UnsafeMutablePointer<pthread_mutex_t> = {
        let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE))
        pthread_mutex_init(lock, &attributes)
        pthread_mutexattr_destroy(&attributes)
        return lock
    }()

    /// Blocks the signals and starts the waiting thread. Call first thing in main, before
    /// any thread is started. Idempotent.
    public static func install() {
        guard !installed else { return }
        installed = true
        var set = signalSet()
        pthread_sigmask(SIG_BLOCK, &set, nil)
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { _ in
            Interruption.waitForSignal()
            return nil
        }, nil)
        guard started == 0 else {
            // Without the waiting thread nobody would take the signals: Ctrl-C must still
            // work, so they go back to their default action (no cleanup, as before).
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
            return
        }
        pthread_detach(thread)
    }

    /// Runs `action` if the process is interrupted before `cancel` is called with the token.
    @discardableResult
    public static func onInterrupt(_ action: @escaping () -> Void) -> Token {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        nextID += 1
        cleanups.append((nextID, action))
        return Token(id: nextID)
    }

    public static func cancel(_ token: Token) {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        cleanups.removeAll { $0.id == token.id }
    }

    /// Runs `body` to its end before any cleanup can start (a commit that publishes).
    public static func critical<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        return try body()
    }

    /// Like `critical`, but sections of this kind run at the same time as each other: threads
    /// creating files that a cleanup must either see or never have made (a vault change's
    /// content files, made on a writer thread and on the caller's) would otherwise take turns
    /// in the kernel's file creation, which is most of their work. `body` must not enter
    /// `critical` or `onInterrupt`/`cancel` (the cleanup holds the lock they take while it
    /// waits here).
    public static func alongside<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_rwlock_rdlock(sections)
        defer { pthread_rwlock_unlock(sections) }
        return try body()
    }

    /// Held shared by `alongside` sections and exclusively by the cleanup, which prefers
    /// itself over new sections (otherwise a stream of them could keep it out).
    nonisolated(unsafe) private static let sections: UnsafeMutablePointer<pthread_rwlock_t> = {
        let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        pthread_rwlock_init(lock, &attributes)
        pthread_rwlockattr_destroy(&attributes)
        return lock
    }()

    private static func signalSet() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signalNumber in signals { sigaddset(&set, signalNumber) }
        return set
    }

    /// Told the signal and whether anything was taken back, after the clean-ups ran (a
    /// message that cannot be written, on a closed terminal, must not keep them from running):
    /// the CLI says so on standard error, since exit 130 alone tells a person nothing.
    /// `committed` is what `committed(_:)` named, if the run got that far (nothing of it was
    /// taken back).
    nonisolated(unsafe) public static var didCleanUp: (@Sendable (_ signal: Int32, _ tookBack: Bool, _ committed: String?) -> Void)?

    /// "Ctrl-C (SIGINT)", "SIGTERM", "SIGHUP": a signal as a person knows it.
    public static func name(of signal: Int32) -> String {
        [SIGINT: "Ctrl-C (SIGINT)", SIGTERM: "SIGTERM", SIGHUP: "SIGHUP"][signal] ?? "signal \(signal)"
    }

    /// Writes a line to standard error in one write(2) whose failure is ignored: what the
    /// signal thread may do (the terminal may be gone; it holds no progress-bar state).
    public static func writeToStandardError(_ line: String) {
        let bytes = Array(line.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }

    /// Told the first signal that came after `committed(_:)`: the run goes on to its end.
    nonisolated(unsafe) public static var willFinish: (@Sendable (_ signal: Int32, _ committed: String) -> Void)?

    /// What the run committed (`committed(_:)`), and whether a signal was already let pass.
    nonisolated(unsafe) private static var committedWork: String?
    nonisolated(unsafe) private static var letOneSignalPass = false

    /// Marks the run's change as committed (a restore's vault change, say): there is nothing
    /// left to take back, and dying now would only make exit 130 say "nothing restored" of a
    /// restore that is complete. The first signal from here on is reported (`willFinish`)
    /// and the run finishes with its own exit status; a second one ends it at once. Call it
    /// inside the `critical` section that commits, so no signal falls between the two.
    public static func committed(_ what: String) {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        committedWork = what
    }

    private static func waitForSignal() {
        var set = signalSet()
        var received: Int32 = 0
        while true {
            while sigwait(&set, &received) != 0 {}
            pthread_mutex_lock(lock)
            guard let committed = committedWork, !letOneSignalPass else { break }
            letOneSignalPass = true
            pthread_mutex_unlock(lock)
            // Outside the lock: a write to a stopped terminal (Ctrl-S) or a full pipe blocks,
            // and the main thread, finishing, needs the lock for its cleanups' cancel.
            willFinish?(received, committed)
        }
        // Held to the end: no `alongside` section starts after the cleanups.
        pthread_rwlock_wrlock(sections)
        Terminal.restoreAfterInterruption()
        let tookBack = !cleanups.isEmpty && committedWork == nil
        for cleanup in cleanups.reversed() { cleanup.action() }
        cleanups.removeAll()
        didCleanUp?(received, tookBack, committedWork)
        // Die of the signal itself: default action, unblocked in this thread, raised here.
        signal(received, SIG_DFL)
        var one = sigset_t()
        sigemptyset(&one)
        sigaddset(&one, received)
        pthread_sigmask(SIG_UNBLOCK, &one, nil)
        raise(received)
        _exit(128 + received)
    }
}

/// posix_spawn attributes that give a child the default signal dispositions and an empty
/// signal mask (a mask is inherited across exec, and ours blocks Ctrl-C; see `Interruption`).
public enum SpawnAttributes {
    public static func withDefaultSignals<T>(_ body: (UnsafePointer<posix_spawnattr_t>) throws -> T) rethrows -> T {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signalNumber in Interruption.signals + [SIGPIPE, SIGQUIT] { sigaddset(&defaults, signalNumber) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        return try body(&attributes)
    }
}
