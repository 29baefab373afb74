import Glibc

/// Asks the kernel to start reading files before they are read, so that from a cold cache
/// many reads are in flight at once instead of one waited for at a time: `vault add` of many
/// small files waited about 110 µs on the disk for a 200-byte note and worked a dozen
/// (issue 34). `posix_fadvise(WILLNEED)` starts a file's read and returns. Only a hint: a
/// file that cannot be opened now, or is no regular file, is left to the read that follows
/// to report. Only the first bytes are asked for: sequential readahead takes over from
/// there, and a large photo is not pulled into the cache whole ahead of its turn. The hints
/// are given from a thread of their own (`HintThread`, `HintedPaths`).
public enum InputPrefetch {
    public static let headBytes: off_t = 1 << 20

    /// Asks the kernel to start reading `path`'s first bytes. Only a regular file is opened
    /// (a FIFO's writer or a device would notice an open), and the opened file is checked
    /// again, should the path have changed between; any failure is ignored.
    public static func hint(_ path: String, headBytes: off_t = headBytes) {
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return }
        let fd = FileDescriptor.openLeavingAccessTime(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { return }
        defer { close(fd) }
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return }
        _ = posix_fadvise(fd, 0, headBytes, POSIX_FADV_WILLNEED)
    }

    /// `hint` for a file in a directory of the user's own that only the user can change (a
    /// vault's content file): opened without the checks that input from elsewhere needs (a
    /// FIFO there is no one's), so three system calls, not five.
    public static func hintOwn(_ path: String, headBytes: off_t = headBytes) {
        let fd = FileDescriptor.openLeavingAccessTime(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW)
        guard fd >= 0 else { return }
        _ = posix_fadvise(fd, 0, headBytes, POSIX_FADV_WILLNEED)
        close(fd)
    }

    /// `hintOwn`, but only for a file whose first byte is not in the cache; returns whether
    /// it was (nil when the kernel cannot tell: the file is hinted then). On Linux 6 the
    /// `RWF_NOWAIT` read that asks already starts the file's readahead; the `fadvise` asks
    /// for `headBytes` whatever the kernel does there.
    @discardableResult
    public static func hintOwnUnlessCached(_ path: String, headBytes: off_t = headBytes) -> Bool? {
        // Its `RWF_NOWAIT` read is a read: without O_NOATIME it would write the inode.
        let fd = FileDescriptor.openLeavingAccessTime(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let cached = PageCache.holdsFirstByte(of: fd)
        if cached != true { _ = posix_fadvise(fd, 0, headBytes, POSIX_FADV_WILLNEED) }
        return cached
    }
}

/// Hints a pass's next files to the kernel from a thread of its own (`InputPrefetch.hintOwn`
/// for each, in order, or `InputPrefetch.hint` for files from elsewhere). The hint's
/// `open` looks the name up in its folder and reads the inode before it returns: from a
/// cold cache that was a disk read waited for alone, and in a folder of 3,000,000 notes
/// the lookup alone cost more than the rest of an item's work.
/// On this thread both are done beside the pass, which then finds the name in the kernel's
/// cache. Given the paths a batch at a time: `hint` replaces what is left of the last batch
/// (one pass has gone past it), `add` appends (several lanes' batches, `create`). A batch
/// may be a thousand files ahead of the pass, so only
/// each file's first `headBytes` are asked for (64 MiB at most for a batch of large photos);
/// sequential readahead takes over once the pass reads the file.
public final class HintThread {
    public static let headBytes: off_t = 64 << 10

    /// Which files are hinted, and so how carefully they are opened.
    public enum Files: Sendable {
        /// Files in a directory only the user can change (a vault's content files): opened
        /// without checks (`InputPrefetch.hintOwn`).
        case own
        /// Files named by the user from anywhere (`vault add`'s inputs): only a regular file
        /// is opened (`InputPrefetch.hint`).
        case fromElsewhere
    }

    /// What the thread and its owner share; the thread holds this, not the owner, so the
    /// owner's `deinit` can stop it.
    private final class Shared: @unchecked Sendable {
        let guarded = LockAndCondition()
        var pending: [String] = []
        var next = 0
        var finished = false
        let files: Files
        let headBytes: off_t
        /// Only on the thread: which paths are worth a hint (`HintPacing`), if paced.
        var pacing: HintPacing?

        init(files: Files, headBytes: off_t, paced: Bool) {
            self.files = files
            self.headBytes = headBytes
            pacing = paced ? HintPacing() : nil
        }

        func run() {
            while true {
                guarded.lock()
                while !finished && next >= pending.count { guarded.wait() }
                if finished { guarded.unlock(); return }
                let path = pending[next]
                next += 1
                guarded.unlock()
                if pacing != nil, files == .own {
                    guard pacing?.shouldHint() == true else { continue }
                    pacing?.hinted(wasCached: InputPrefetch.hintOwnUnlessCached(path, headBytes: headBytes))
                    continue
                }
                switch files {
                case .own: InputPrefetch.hintOwn(path, headBytes: headBytes)
                case .fromElsewhere: InputPrefetch.hint(path, headBytes: headBytes)
                }
            }
        }
    }

    private let shared: Shared
    private var thread: pthread_t?

    /// Starts the thread; without one (none to be had) `hint` does nothing. `paced` (for
    /// `.own` files): hints are given sparingly while the files turn out to be in the cache
    /// (`HintPacing`).
    public init(files: Files, headBytes: off_t = HintThread.headBytes, paced: Bool = false) {
        shared = Shared(files: files, headBytes: headBytes, paced: paced)
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
        shared.guarded.lock()
        shared.pending = paths
        shared.next = 0
        shared.guarded.signal()
        shared.guarded.unlock()
    }

    /// Hints `paths` after those not yet hinted (for passes that take their batches from
    /// several threads, in the order they are to be read). At most `addedAhead` paths wait:
    /// past that the oldest are dropped (the pass has read them by now), so a thread that
    /// falls behind a pass of millions of files holds a few thousand paths, not the pass.
    public func add(_ paths: [String]) {
        shared.guarded.lock()
        (shared.pending, shared.next) = Self.waiting(after: paths, addedTo: shared.pending, hinted: shared.next)
        shared.guarded.signal()
        shared.guarded.unlock()
    }

    public static let addedAhead = 4096

    /// The paths held once `paths` are added to `pending`, of which the first `hinted` were
    /// hinted, and how many of them count as hinted: what was hinted goes, and the oldest
    /// are passed over while more than `addedAhead` wait.
    static func waiting(after paths: [String], addedTo pending: [String], hinted: Int) -> (pending: [String], next: Int) {
        let held = Array(pending.dropFirst(max(hinted, pending.count - addedAhead))) + paths
        return (held, max(0, held.count - addedAhead))
    }

    /// Stops the thread (after the hint it is giving) and waits for it. Idempotent.
    public func finish() {
        shared.guarded.lock()
        shared.finished = true
        shared.guarded.signal()
        shared.guarded.unlock()
        if let thread {
            pthread_join(thread, nil)
            self.thread = nil
        }
    }

    deinit { finish() }
}

/// Which files a paced `HintThread` hints. For `create`, whose content files are read in ID
/// order (at random on the disk), hints made a run of 100,000 notes from a cold cache twice
/// as fast, but cost a warm run a few percent: three system calls a file on the other core, for
/// files already there (BENCHMARKS.md). So each run of `probe` hints also tells whether
/// the files were in the cache (`InputPrefetch.hintOwnUnlessCached`). After a run of which
/// all were, the next paths go unhinted: `firstSkip` of them, twice as many after each
/// further such run, up to `longestSkip`; a run with one file out of the cache starts over.
/// On a warm cache about one path in sixty is looked at; from a cold one every path is
/// hinted (a run found in the cache because a lane read it first costs `firstSkip` paths).
/// How long a hint took was no sign: once the inodes are read, a hint's `open` is quick
/// while the files' contents are still on the disk.
public struct HintPacing: Sendable {
    public static let probe = 64
    public static let firstSkip = 3 * 64
    public static let longestSkip = 63 * 64

    private var hintedInProbe = 0
    private var cachedInProbe = 0
    private var skipping = 0
    private var nextSkip = firstSkip

    public init() {}

    /// Whether the next path is to be hinted.
    public mutating func shouldHint() -> Bool {
        guard skipping == 0 else {
            skipping -= 1
            return false
        }
        return true
    }

    /// Records a hinted file: whether it was in the cache already (nil: not known, or it
    /// did not open; counted as not).
    public mutating func hinted(wasCached: Bool?) {
        hintedInProbe += 1
        if wasCached == true { cachedInProbe += 1 }
        guard hintedInProbe == Self.probe else { return }
        if cachedInProbe == Self.probe {
            skipping = nextSkip
            nextSkip = min(2 * nextSkip, Self.longestSkip)
        } else {
            nextSkip = Self.firstSkip
        }
        (hintedInProbe, cachedInProbe) = (0, 0)
    }
}

/// Hands back a list's paths in order while a `HintThread` hints the next batch of them:
/// when the pass starts on a batch, the one after it goes to the thread (the first two at
/// once), so the hints run up to two batches ahead. `vault add` gave these hints inline,
/// five system calls a file on the pass's own thread even when the files were in the cache
/// (issue 34); here they cost the pass none.
public struct HintedPaths {
    public static let batch = 64
    private let hints: HintThread
    private var current: [String] = []
    private var upcoming: [String] = []
    private var index = 0
    private var started = false
    private var finished = false

    /// Files from elsewhere (`HintThread.Files.fromElsewhere`), the first `headBytes` of each.
    public init(headBytes: off_t = InputPrefetch.headBytes) {
        hints = HintThread(files: .fromElsewhere, headBytes: headBytes)
    }

    /// The next path (`source` gives them in order, nil after the last), or nil after the
    /// last; the hint thread is stopped then.
    public mutating func next(from source: () throws -> String?) rethrows -> String? {
        guard !finished else { return nil }
        if index == current.count {
            if started {
                let after = try Self.take(from: source)
                (current, upcoming, index) = (upcoming, after, 0)
                hints.hint(upcoming)
            } else {
                let first = try Self.take(from: source), second = try Self.take(from: source)
                (current, upcoming, index, started) = (first, second, 0, true)
                hints.hint(current + upcoming)
            }
            if current.isEmpty {
                finished = true
                hints.finish()
                return nil
            }
        }
        defer { index += 1 }
        return current[index]
    }

    private static func take(from source: () throws -> String?) rethrows -> [String] {
        var paths: [String] = []
        paths.reserveCapacity(batch)
        while paths.count < batch, let path = try source() { paths.append(path) }
        return paths
    }
}
