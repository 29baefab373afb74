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
    static let headBytes: off_t = 1 << 20

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
    public static func hintOwn(_ path: String) {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW)
        guard fd >= 0 else { return }
        _ = posix_fadvise(fd, 0, headBytes, POSIX_FADV_WILLNEED)
        close(fd)
    }
}

/// Tells whether a pass over many files is waiting on the disk, from how long its last
/// `window` items took: prefetching (`InputPrefetch.hintOwn`) pays from a cold cache (a
/// 200-byte note read alone waits about 100 µs) and costs three system calls an item from a
/// warm one (`vault verify` of 100,000 notes: 1.9 → 2.4 s warm, 10–13 → 6–8 s cold). So
/// hints are given only while items take longer than `coldItemNanoseconds` on average.
public struct DiskWaitDetector {
    public static let window = 64
    /// Between a warm note (about 20 µs) and a cold one (about 100 µs).
    static let coldItemNanoseconds: UInt64 = 40_000

    private var windowStart = DiskWaitDetector.now()
    private var items = 0
    /// Whether the last window's items waited on the disk (assumed for the first window).
    public private(set) var waiting = true

    public init() {}

    /// Counts an item done; true when `waiting` has just turned on (the caller then hints a
    /// whole window ahead at once).
    public mutating func itemDone() -> Bool {
        items += 1
        guard items == Self.window else { return false }
        let now = Self.now()
        let was = waiting
        waiting = (now - windowStart) / UInt64(Self.window) > Self.coldItemNanoseconds
        windowStart = now
        items = 0
        return waiting && !was
    }

    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
