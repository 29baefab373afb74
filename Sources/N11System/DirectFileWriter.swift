internal import CLinux
import Glibc

/// Writes a new file from its start around the page cache (O_DIRECT), for files that are
/// large, written once and made durable before anyone reads them (but a reader that waits
/// for the writes first, `vault add`'s duplicate check): a restored or added photo's
/// content file, or an exported photo. A buffered write copies every byte into a
/// page-cache page the kernel must first find and clear, then writes it back later; on a
/// virtual machine whose free memory goes back to its host (`page_reporting`) that first
/// touch took 40% of a restore's thread (BENCHMARKS.md, "Photos written around the page
/// cache"). A direct write goes from this process's buffer to the disk, and the syncfs
/// that publishes the file then finds nothing of it left to write.
///
/// Bytes are gathered in aligned buffers (`DirectWriteBuffers`); a full one is written by
/// the buffers' own thread while the caller fills the next, so the caller does not wait for
/// the disk, not even at a file's end: the file's last writes and whatever
/// the caller asks to follow them (setting its time, closing it) run on that thread while the
/// caller goes on with the next file. The end of a file goes in two parts: its whole blocks
/// directly, the last partial block through the page cache (O_DIRECT cleared first: direct
/// I/O takes whole blocks). Only ext4, XFS and btrfs are asked for direct I/O; a file system
/// that refuses the flag or a write (EINVAL) gets the file through the page cache.
public final class DirectFileWriter: ByteSink {
    /// Alignment of the buffers, of every direct write's offset and of its length: 4 KiB, a
    /// multiple of every common device's logical block (a file system that needs more answers
    /// EINVAL, and the file goes through the page cache).
    static let alignment = 4096

    /// From this size up a file is worth writing directly: below it the two `fcntl`s and the
    /// `fstatfs` cost more than the page cache's first touch, and most of a small file would
    /// be its partial last block anyway.
    public static let worthFrom: Int64 = 1 << 20

    /// What runs on the buffers' thread after a file's last write: it owns the file from then
    /// on and must close it. It does not run when a write of the file failed; the descriptor
    /// is then closed when the failed job is let go (`FileDescriptor` closes on deinit).
    public typealias Completion = @Sendable (FileDescriptor) throws -> Void

    private let file: FileDescriptor
    private let buffers: DirectWriteBuffers
    private let mode: WriteMode
    /// How much of the buffer being filled is, and where it goes in the file.
    private var filled = 0
    private var offset: Int64 = 0

    /// Writes a new, empty `file` (open for writing) with what `body` gives the writer.
    ///
    /// When `body` returns, the file's last writes and then `completion` are queued on the
    /// buffers' thread, and `file` belongs to them: the caller must not use it again, and
    /// must call `buffers.waitForWrites()` before it relies on the file being written (a
    /// syncfs, a read, publishing). A failed write or completion is thrown by the buffers'
    /// next call (the next file's, or that wait); its error names the file.
    ///
    /// When `body` throws, no write of the file is under way when this returns, `completion`
    /// does not run, and the file is the caller's again, to close and remove.
    public static func writing<T>(to file: FileDescriptor, through buffers: DirectWriteBuffers,
                                  then completion: @escaping Completion,
                                  _ body: (DirectFileWriter) throws -> T) throws -> T {
        let writer = DirectFileWriter(file, buffers: buffers)
        let result: T
        do { result = try body(writer) } catch {
            // An earlier file's failed write is the error to report, not this body's: a body
            // that stops on a damaged item (which a salvage skips) must not hide a file that
            // was left short, nor let the change commit it.
            do { try buffers.waitForWrites() } catch let earlier {
                buffers.abandonWrites()
                throw earlier
            }
            buffers.abandonWrites()
            throw error
        }
        try writer.finish(then: completion)
        return result
    }

    private init(_ file: FileDescriptor, buffers: DirectWriteBuffers) {
        self.file = file
        self.buffers = buffers
        mode = WriteMode(direct: n11_direct_io_suits(file.rawValue) == 1 && n11_set_direct_io(file.rawValue, 1) == 0)
    }

    public func write(_ bytes: ArraySlice<UInt8>) throws {
        var rest = bytes
        while !rest.isEmpty {
            let base = buffers.filling
            let n = min(rest.count, buffers.capacity - filled)
            rest.withUnsafeBytes { raw in
                // `rest` is not empty, so it has an address.
                if let from = raw.baseAddress { (base + filled).copyMemory(from: from, byteCount: n) }
            }
            filled += n
            rest = rest.dropFirst(n)
            if filled == buffers.capacity {
                try buffers.handOver(Self.job(file: file, mode: mode, base: base, count: filled, at: offset, wipe: buffers.holdsPlaintext))
                offset += Int64(filled)
                filled = 0
            }
        }
    }

    /// Queues what is left: the whole blocks directly, the partial last one through the
    /// page cache, then `completion`. If the queueing itself fails, the file was not handed
    /// over and is the caller's again.
    private func finish(then completion: @escaping Completion) throws {
        let base = buffers.filling
        let whole = filled / Self.alignment * Self.alignment
        let direct = Self.job(file: file, mode: mode, base: base, count: whole, at: offset, wipe: false)
        let tail = Self.job(file: file, mode: mode, base: base + whole, count: filled - whole, at: offset + Int64(whole), wipe: false)
        let (file, mode, count, plaintext) = (file, mode, filled, buffers.holdsPlaintext)
        nonisolated(unsafe) let start = base
        do {
            try buffers.handOver {
                try direct()
                if count > whole {
                    if mode.direct {
                        mode.direct = false
                        _ = n11_set_direct_io(file.rawValue, 0)
                    }
                    try tail()
                }
                if plaintext { explicit_bzero(start, count) }
                try completion(file)
            }
        } catch {
            buffers.abandonWrites()
            throw error
        }
    }

    /// Whether any of the file's bytes were written directly; read once `waitForWrites`
    /// returned (for the tests).
    var wroteDirectly: Bool { mode.directWrites > 0 }

    /// Writes `count` bytes from `base` at `offset` of `file`, retrying short writes and EINTR;
    /// on EINVAL from a direct write, clears O_DIRECT and writes through the page cache.
    /// With `wipe`, the bytes are wiped once written (an export's plaintext).
    private static func job(file: FileDescriptor, mode: WriteMode, base: UnsafeMutableRawPointer, count: Int,
                            at offset: Int64, wipe: Bool) -> SerialWorker.Job {
        // The buffer outlives the job: its owner waits for the job before refilling or freeing it.
        nonisolated(unsafe) let pointer = base
        return {
            var done = 0
            while done < count {
                let n = pwrite(file.rawValue, pointer + done, count - done, off_t(offset + Int64(done)))
                if n < 0 {
                    let error = errno
                    if error == EINTR { continue }
                    if error == EINVAL, mode.direct {
                        mode.direct = false
                        _ = n11_set_direct_io(file.rawValue, 0)
                        continue
                    }
                    throw SystemError("cannot write", path: file.path)
                }
                // A write that takes nothing would loop forever.
                guard n > 0 else { throw SystemError("cannot write", path: file.path, errno: EIO) }
                done += n
            }
            if mode.direct, count > 0 { mode.directWrites += 1 }
            if wipe { explicit_bzero(pointer, count) }
        }
    }
}

/// Whether a file is still written directly. Set by the caller's thread when the file is
/// opened and by its jobs after that, which run one at a time on the buffers' thread.
private final class WriteMode: @unchecked Sendable {
    var direct: Bool
    /// How many writes went around the page cache (for the tests).
    var directWrites = 0
    init(direct: Bool) { self.direct = direct }
}

/// The aligned buffers and the thread of `DirectFileWriter`s, kept by a writer of many files
/// (a vault change, an export) so that each file neither maps and faults in memory of its
/// own nor starts a thread. Buffers that hold plaintext (an export's files) are wiped as soon
/// as their bytes are written; a vault's content files are ciphertext. Used from one thread
/// at a time, besides its own.
///
/// Filled in turn, each handed to the thread as one write: while the caller fills one, the
/// others may wait to be written. Two buffers made the caller wait for every write under way
/// before it filled the next: a restore's thread waited 0.18 s of 1.8 s so (issue 29,
/// BENCHMARKS.md), since a write of 1 MiB takes about as long as sealing one, and either
/// sometimes takes longer. More buffers let one side run ahead of the other for a while.
public final class DirectWriteBuffers: @unchecked Sendable {
    public let capacity: Int
    /// How many buffers of `capacity` there are (at least two).
    let count: Int
    let holdsPlaintext: Bool
    private let memory: UnsafeMutableRawPointer
    /// The buffer being filled; the others may wait to be written, in turn after it.
    private var current = 0
    /// Started with the first write; nil after a write failed (a new one is started for the
    /// next file) or where no thread is to be had (then writes run in place).
    private var worker: SerialWorker?

    public init(capacity: Int = 1 << 20, count: Int = 4, holdsPlaintext: Bool) {
        precondition(capacity > 0 && capacity % DirectFileWriter.alignment == 0 && count >= 2)
        self.capacity = capacity
        self.count = count
        self.holdsPlaintext = holdsPlaintext
        // Mapped, not allocated: pages aligned for O_DIRECT, zero until written, and not
        // touched (faulted in) until a file uses them; malloc may hand out a used block.
        let mapped = mmap(nil, count * capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let mapped, mapped != MAP_FAILED else { preconditionFailure("cannot map \(count * capacity) bytes for direct writes") }
        memory = mapped
    }

    deinit {
        worker?.cancel()
        wipe()
        munmap(memory, count * capacity)
    }

    /// Whether any file used the buffers: an export of notes alone never touches them, and
    /// wiping them would fault in their memory for nothing.
    private var used = false

    /// The buffer being filled; free, since the job that last wrote it has run (`handOver`
    /// waits for it before moving here).
    var filling: UnsafeMutableRawPointer {
        used = true
        return memory + current * capacity
    }

    /// Starts `job`, which writes the buffer being filled (every job given here writes the
    /// buffer that was being filled: a file's last writes and its completion are one job),
    /// and moves to the next buffer. Jobs run in order, so the job that last wrote the next
    /// buffer has run once at most `count - 2` jobs are left before this one is given: that
    /// is waited for first, so that only an earlier write's error is thrown here, never
    /// this job's (it is thrown by the next call, as with two buffers, where this waits
    /// for every write).
    func handOver(_ job: @escaping SerialWorker.Job) throws {
        if worker == nil { worker = SerialWorker(batchSize: 1, batchesAhead: count - 1) }
        if let worker {
            do {
                try worker.waitUntil(atMostPending: count - 2)
                try worker.submit(job)
            } catch {
                worker.cancel()
                self.worker = nil
                wipe()
                throw error
            }
        } else { try job() }
        current = (current + 1) % count
    }

    /// Waits until every write and completion given is done; throws the first failed one's
    /// error (and the next file gets a new thread: a failed `SerialWorker` takes no more jobs).
    public func waitForWrites() throws {
        guard let worker else { return }
        do { try worker.waitUntilDone() } catch {
            worker.cancel()
            self.worker = nil
            wipe()
            throw error
        }
    }

    /// Waits for what is under way without reporting a failure: the files are given up.
    public func abandonWrites() {
        try? waitForWrites()
        wipe()
    }

    /// Whether every byte of every buffer is zero (for the tests).
    var isClear: Bool {
        UnsafeRawBufferPointer(start: memory, count: count * capacity).allSatisfy { $0 == 0 }
    }

    private func wipe() {
        if holdsPlaintext, used { explicit_bzero(memory, count * capacity) }
    }
}
