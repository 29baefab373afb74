import Glibc

/// Keeps the kernel reading the next few input files while the current one is worked on.
/// `vault add` of many small files from a cold cache waited on one disk read at a time
/// (a 200-byte note: about 110 µs of waiting, a dozen of work); `posix_fadvise(WILLNEED)`
/// starts a file's read and returns, so `depth` reads are in flight at once (issue 34).
/// Only a hint: a file that cannot be opened now, or is no regular file, is left to the
/// read that follows to report. Only the first `headBytes` are asked for: sequential
/// readahead takes over from there, and a large photo is not pulled into the cache whole
/// ahead of its turn.
public struct InputPrefetch {
    public static let depth = 64
    public static let headBytes: off_t = 1 << 20

    private var pending: [String] = []
    private var head = 0

    public init() {}

    /// Hands back the paths in order, each hinted `depth` paths before it is handed back.
    /// `next` gives the next path, or nil after the last.
    public mutating func next(from source: () throws -> String?) rethrows -> String? {
        while pending.count - head < Self.depth, let path = try source() {
            Self.hint(path)
            pending.append(path)
        }
        guard head < pending.count else { return nil }
        let path = pending[head]
        head += 1
        if head >= Self.depth {   // drop what was handed back, now and then, not per call
            pending.removeFirst(head)
            head = 0
        }
        return path
    }

    /// Asks the kernel to start reading `path`'s first bytes. Only a regular file is opened
    /// (a FIFO's writer or a device would notice an open), and the opened file is checked
    /// again, should the path have changed between; any failure is ignored.
    public static func hint(_ path: String) {
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return }
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return }
        defer { close(fd) }
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return }
        _ = posix_fadvise(fd, 0, headBytes, POSIX_FADV_WILLNEED)
    }

    /// `hint` for a file in a directory of the user's own that only the user can change (a
    /// vault's content file): opened without the checks that input from elsewhere needs (a
    /// FIFO there is no one's), so three system calls, not five.
    public static func hintOwn(_ path: String, headBytes: off_t = headBytes) {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW)
        guard fd >= 0 else { return }
        _ = posix_fadvise(fd, 0, headBytes, POSIX_FADV_WILLNEED)
        close(fd)
    }
}

/// Hints a pass's next files to the kernel from a thread of its own (`InputPrefetch.hintOwn`
/// for each, in order). The hint's `open` looks the name up in its folder and reads the
/// inode before it returns: from a cold cache that was a disk read waited for alone, and in
/// a folder of 3,000,000 notes the lookup alone cost more than the rest of an item's work.
/// On this thread both are done beside the pass, which then finds the name in the kernel's
/// cache. Given the paths a batch at a time; a new batch replaces what is left of the last
/// (the pass has gone past it). A batch may be a thousand files ahead of the pass, so only
/// each file's first `headBytes` are asked for (64 MiB at most for a batch of large photos);
/// sequential readahead takes over once the pass reads the file.
public final class HintThread {
    public static let headBytes: off_t = 64 << 10

    /// What the thread and its owner share; the thread holds this, not the owner, so the
    /// owner's `deinit` can stop it.
    private final class Shared: @unchecked Sendable {
        let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        var pending: [String] = []
        var next = 0
        var finished = false

        init() {
            pthread_mutex_init(lock, nil)
            pthread_cond_init(changed, nil)
        }

        deinit {
            pthread_cond_destroy(changed)
            pthread_mutex_destroy(lock)
            changed.deallocate()
            lock.deallocate()
        }

        func run() {
            while true {
                pthread_mutex_lock(lock)
                while !finished && next >= pending.count { pthread_cond_wait(changed, lock) }
                if finished { pthread_mutex_unlock(lock); return }
                let path = pending[next]
                next += 1
                pthread_mutex_unlock(lock)
                InputPrefetch.hintOwn(path, headBytes: HintThread.headBytes)
            }
        }
    }

    private let shared = Shared()
    private var thread: pthread_t?

    /// Starts the thread; without one (none to be had) `hint` does nothing.
    public init() {
        var id = pthread_t()
        let context = Unmanaged.passRetained(shared).toOpaque()
        if pthread_create(&id, nil, { raw in
            Unmanaged<Shared>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, context) == 0 {
            thread = id
        } else {
            Unmanaged<Shared>.fromOpaque(context).release()
        }
    }

    /// Hints `paths` in order, in place of any not yet hinted.
    public func hint(_ paths: [String]) {
        pthread_mutex_lock(shared.lock)
        shared.pending = paths
        shared.next = 0
        pthread_cond_signal(shared.changed)
        pthread_mutex_unlock(shared.lock)
    }

    /// Stops the thread (after the hint it is giving) and waits for it. Idempotent.
    public func finish() {
        pthread_mutex_lock(shared.lock)
        shared.finished = true
        pthread_cond_signal(shared.changed)
        pthread_mutex_unlock(shared.lock)
        if let thread {
            pthread_join(thread, nil)
            self.thread = nil
        }
    }

    deinit { finish() }
}
