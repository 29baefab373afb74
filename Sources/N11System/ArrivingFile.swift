import Glibc

/// A local file whose bytes are still arriving (an archive downloaded while it is read,
/// issue 29). It has its final size from the start. Its last bytes (from `tailStart`) come
/// in one piece (`tailArrived()`), fetched beside the rest because a ZIP is opened from its
/// end; the rest arrives in order from byte 0. A reader on any thread waits for the bytes it
/// asks for; when the download fails, every reader waiting or to come gets that failure
/// instead of bytes that never came.
///
/// The writers tell how far the file has arrived (`arrived(upTo:)`, `tailArrived()`), then
/// `bodyArrived()` or `fail(_:)`. Nothing read through this is trusted more than any file's bytes.
public final class ArrivingFile: @unchecked Sendable {
    public let path: String
    public let size: Int64
    /// Bytes from here to `size` arrive in one piece.
    public let tailStart: Int64
    private let file: FileDescriptor
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Bytes `0..<arrived` are in the file.
    private var arrived: Int64 = 0
    private var tailIsHere: Bool
    /// The body (`0..<tailStart`) arrived whole.
    private var bodyIsHere = false
    private var finished = false
    private var failureCause: (any Error)?

    /// Opens `path` for reading: `size` bytes in all, those from `tailStart` in one piece.
    public init(path: String, size: Int64, tailStart: Int64) throws {
        precondition(0 <= tailStart && tailStart <= size)
        self.path = path
        self.size = size
        self.tailStart = tailStart
        tailIsHere = tailStart == size
        file = try FileDescriptor.openForReading(path)
        pthread_mutex_init(lock, nil)
        pthread_cond_init(changed, nil)
    }

    deinit {
        pthread_cond_destroy(changed)
        pthread_mutex_destroy(lock)
        lock.deallocate()
        changed.deallocate()
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        return try body()
    }

    // MARK: The writer

    /// Bytes `0..<end` are written.
    public func arrived(upTo end: Int64) {
        locked {
            arrived = max(arrived, min(end, tailStart))
            pthread_cond_broadcast(changed)
        }
    }

    /// The tail (`tailStart..<size`) is written.
    public func tailArrived() {
        locked {
            tailIsHere = true
            finished = bodyIsHere
            pthread_cond_broadcast(changed)
        }
    }

    /// Everything before the tail is written.
    public func bodyArrived() {
        locked {
            arrived = tailStart
            bodyIsHere = true
            finished = tailIsHere
            pthread_cond_broadcast(changed)
        }
    }

    /// The download failed: readers get `error` for every byte that has not arrived.
    public func fail(_ error: any Error) {
        locked {
            if failureCause == nil { failureCause = error }
            finished = true
            pthread_cond_broadcast(changed)
        }
    }

    // MARK: Readers

    /// Waits until bytes `offset..<offset + count` are in the file (or, past the end, until
    /// the end is); throws the download's failure if it stopped short of them.
    public func waitFor(offset: Int64, count: Int) throws {
        let end = min(size, offset + Int64(count))
        let needsTail = end > tailStart
        // Of the body: up to the end asked for (nothing when all of it is in the tail).
        let needed = offset < tailStart ? min(end, tailStart) : 0
        try locked {
            while arrived < needed || (needsTail && !tailIsHere) {
                if let failureCause { throw failureCause }
                pthread_cond_wait(changed, lock)
            }
        }
    }

    /// Reads up to `count` bytes at `offset` into `buffer`, waiting for them first.
    public func read(into buffer: UnsafeMutableRawPointer, count: Int, at offset: Int64) throws -> Int {
        guard offset < size, count > 0 else { return 0 }
        let wanted = Int(min(Int64(count), size - offset))
        try waitFor(offset: offset, count: wanted)
        while true {
            let n = pread(file.rawValue, buffer, wanted, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR { throw SystemError("cannot read", path: path) }
        }
    }

    /// Waits for the whole file; throws the download's failure.
    public func waitUntilWhole() throws {
        try locked {
            while !finished { pthread_cond_wait(changed, lock) }
            if let failureCause { throw failureCause }
        }
    }

    /// Why the download stopped short, once it has: the cause to report of any failure
    /// that reading met meanwhile (libzip keeps only an errno of it).
    public var failure: (any Error)? { locked { failureCause } }
}
