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
}
