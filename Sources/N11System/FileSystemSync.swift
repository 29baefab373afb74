internal import CLinux
import Glibc

/// The flush at a commit point of a change that writes many files to one file system (a
/// vault change, an export's staging): everything written there made durable — file data,
/// new files and directory entries — with one `syncfs(2)` instead of an fsync per file (the
/// per-file fsyncs cost milliseconds each and dominated restoring 20,000 notes).
///
/// Opened before the change writes its first file, and it must be: since Linux 5.8 syncfs
/// reports the file system's writeback errors to a descriptor if they came after it was
/// opened, or, for an error from before, only if no syncfs on that file system has reported
/// it yet (`errseq_sample` in lib/errseq.c). A descriptor opened at the commit missed an
/// error of this change's writeback that another syncfs had already reported (this type's
/// own writeback thread does so four times a second, and any other program may), and the
/// commit went ahead over data that never reached the disk. (An unreported error from
/// before the change fails its commit: the safe side.)
///
/// `startWriteback()` has that writeback done while the change goes on, so that the commit
/// point does not wait for all of it at the end (BENCHMARKS.md, "Writeback while a restore
/// writes").
public final class FileSystemSync {
    public let path: String
    private let descriptor: FileDescriptor
    private var writeback: BackgroundThread?
    /// No descriptor or thread was to be had for the writeback: not tried again (an export
    /// asks at every small file).
    private var writebackUnavailable = false

    /// `path`: a directory on the file system the change writes to, as the user named it
    /// (a vault may live behind a link).
    public convenience init(containing path: String) throws {
        self.init(try FileDescriptor.openDirectory(path))
    }

    /// On the file system of the directory `descriptor` is open on, which it keeps.
    init(_ descriptor: FileDescriptor) {
        self.descriptor = descriptor
        path = descriptor.path
    }

    /// Starts asking the kernel to write back what has been written, four times a second on
    /// a thread of its own, until `sync()` or `stopWriteback()`. On two cores writing 100,000
    /// notes' files keeps one busy while the other waits on it part of the time; writeback
    /// done then is off the commit's wait (0.6 s of syncfs at the end became 5 ms). Its
    /// syncfs calls go through a descriptor of their own (opened anew on the same directory:
    /// a `dup` would share the error cursor and use up an error `sync()` must see), and
    /// their results are dropped: any error they meet is reported to `sync()` too, whose
    /// descriptor is older. Idempotent.
    public func startWriteback() {
        guard writeback == nil, !writebackUnavailable else { return }
        let fd = openat(descriptor.rawValue, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        // No writeback ahead: the commit's syncfs does it all.
        guard fd >= 0 else { return writebackUnavailable = true }
        let own = FileDescriptor(adopting: fd, path: path)
        writeback = BackgroundThread { stopped in
            while !stopped() {
                // Short naps, so that stopping waits for at most one of them (and a syncfs).
                for _ in 0..<25 where !stopped() { usleep(10_000) }
                if !stopped() { _ = n11_syncfs(own.rawValue) }
            }
        }
        if writeback == nil { writebackUnavailable = true }
    }

    /// Whether the writeback thread runs.
    public var isWritingBack: Bool { writeback != nil }

    /// Stops the writeback thread, if any, and waits for it to end. Idempotent.
    /// `waiting: false` (a failure's way out: a discard, an export taken back) lets the
    /// thread end by itself: a syncfs it is in may take minutes on a slow stick, and the
    /// error it follows should not wait for it. Its descriptor goes with it.
    public func stopWriteback(waiting: Bool = true) {
        if waiting { writeback?.stop() } else { writeback?.stopWithoutWaiting() }
        writeback = nil
    }

    /// Makes everything written on the file system durable; throws if it may not be (an
    /// error writing back anything since this was opened), and the commit must not go ahead.
    public func sync() throws {
        stopWriteback()
        guard n11_syncfs(descriptor.rawValue) == 0 else { throw SystemError("cannot flush the file system to disk", path: path) }
    }

    deinit { stopWriteback() }
}

extension DirectoryHandle {
    /// The flush of this directory's file system, through a descriptor opened on it now,
    /// relative to this handle (no path is looked up again).
    public func fileSystemSync() throws -> FileSystemSync {
        let fd = openat(descriptor.rawValue, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError("cannot open directory", path: path) }
        return FileSystemSync(FileDescriptor(adopting: fd, path: path))
    }
}
