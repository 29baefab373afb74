import Glibc
import Synchronization

/// Reads a file into the page cache from start to end on a second thread, while a pass that
/// will read all of it in another order goes on. A pass over the vault's catalogue in the
/// order of the content files' inodes looks records up at random: from a cold cache each
/// B-tree page was a disk read waited for alone (`vault verify` of 3,000,000 notes, a
/// 1.2 GB catalogue), where one sequential sweep reads the whole file in about 3 s.
///
/// Only pages not yet in the cache are read (`mincore`), a window at a time, so a warm file
/// costs a few system calls. A file larger than a quarter of the machine's memory is left
/// alone: its first pages would be pushed out by its last before the pass came to them. The
/// bytes read are dropped at once (the warmer keeps one window-sized buffer); a file that
/// cannot be opened is left to the pass to report.
public final class CacheWarmer: @unchecked Sendable {
    static let window = 1 << 20

    private final class Job: Sendable {
        let fd: Int32
        let size: Int
        let stopped = Atomic<Bool>(false)
        init(fd: Int32, size: Int) { self.fd = fd; self.size = size }
        deinit { close(fd) }
    }

    private let job: Job
    private var thread: pthread_t?

    /// Starts warming `path`, or returns nil when there is nothing worth doing: no regular
    /// file, empty, too large for the cache, or no thread to be had.
    public static func start(_ path: String) -> CacheWarmer? {
        // Only a regular file is opened (a FIFO's writer would notice an open), and checked
        // again once open, should the path have changed between.
        var st = stat()
        guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else { return nil }
        let pages = sysconf(Int32(_SC_PHYS_PAGES)), pageSize = sysconf(Int32(_SC_PAGESIZE))
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_size > 0,
              pages > 0, pageSize > 0, Int(st.st_size) <= pages / 4 * pageSize else {
            close(fd)
            return nil
        }
        let warmer = CacheWarmer(Job(fd: fd, size: Int(st.st_size)))
        return warmer.thread == nil ? nil : warmer
    }

    private init(_ job: Job) {
        self.job = job
        var id = pthread_t()
        let context = Unmanaged.passRetained(job).toOpaque()
        let rc = pthread_create(&id, nil, { raw in
            let job = Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue()
            CacheWarmer.warm(job)
            return nil
        }, context)
        if rc == 0 { thread = id } else { Unmanaged<Job>.fromOpaque(context).release() }
    }

    /// Stops the sweep (after the window it is reading) and waits for it. Idempotent.
    public func stop() {
        job.stopped.store(true, ordering: .relaxed)
        if let thread {
            pthread_join(thread, nil)
            self.thread = nil
        }
    }

    deinit { stop() }

    /// Waits for the sweep to end (for tests: the cache is then as warm as the warmer makes it).
    func wait() {
        if let thread {
            pthread_join(thread, nil)
            self.thread = nil
        }
    }

    private static func warm(_ job: Job) {
        let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
        // Mapped only to ask which pages are resident (`mincore`): the mapping is never
        // touched, so a file cut short meanwhile costs no SIGBUS.
        guard let map = mmap(nil, job.size, PROT_READ, MAP_SHARED, job.fd, 0), map != MAP_FAILED else { return }
        defer { munmap(map, job.size) }
        var resident = [UInt8](repeating: 0, count: window / pageSize)
        var buffer = [UInt8](repeating: 0, count: window)
        var offset = 0
        while offset < job.size, !job.stopped.load(ordering: .relaxed) {
            let length = min(window, job.size - offset)
            let inCache = resident.withUnsafeMutableBufferPointer { pages in
                mincore(map + offset, length, pages.baseAddress) == 0
                    && pages.prefix((length + pageSize - 1) / pageSize).allSatisfy { $0 & 1 == 1 }
            }
            if !inCache {
                let got = buffer.withUnsafeMutableBytes { pread(job.fd, $0.baseAddress, length, off_t(offset)) }
                guard got > 0 else { return }
            }
            offset += length
        }
    }
}
