internal import CLinux
import Glibc

/// Reads a large file from its start around the page cache (O_DIRECT), for a file that is
/// not in the cache and is read once: a photo's content file in `vault verify`, or in a
/// nightly `create` from a vault the kernel has not read lately (issue 34). A buffered read of
/// a file out of the cache has the kernel find, fill and copy out a page-cache page for every
/// 4 KiB; on this project's machine (a virtual machine whose free memory goes back to its
/// host) that cost 5.7 s of system time for a 5 GiB photo, where direct reads of the same
/// file took 0.5 s (BENCHMARKS.md, "Large files read around the page cache"), CPU that
/// `vault verify` and `create` need for the items' ciphers and digests.
///
/// Direct reads get no readahead from the kernel, so a thread of the reader's own reads the
/// file ahead, `blocksAhead` aligned blocks of `blockSize`, while the caller copies out of the
/// block before: neither waits for the other while both have work. O_DIRECT is a flag of the
/// open file; it is cleared again when the file has been read to its end or the reader is let
/// go, so the descriptor reads through the page cache again after. A file system that refuses
/// a direct read (EINVAL) gets the rest of the file read through the page cache. The file is
/// only read: the page cache keeps nothing of it, and a dirty page of it is written back by
/// the kernel before a direct read of its range, so what is read is what a buffered read
/// would give.
public final class DirectFileReader: ByteSource {
    /// From this size up a file out of the cache is read directly: below it a thread of its
    /// own and the `fcntl`s cost more than the page cache's pages.
    public static let worthFrom: Int64 = 4 << 20
    static let blockSize = 1 << 20
    static let blocksAhead = 3

    private let shared: DirectReadAhead
    private var thread: BackgroundThread?
    /// The block being copied out (its slot), how much of it there is and how much was taken.
    private var block = -1
    private var available = 0
    private var position = 0
    /// The current block was the file's last (shorter than a block, or empty).
    private var atLastBlock = false

    /// A reader of `file` from its first byte if the file is worth reading directly: at
    /// least `worthFrom` bytes (`size`), on ext4, XFS or btrfs, and the page in its middle not
    /// in the page cache (a file the kernel holds, or has just been given, is read faster
    /// from there; asked with `mincore`, which starts no read). nil: read `file` as it is.
    public static func ifUncached(_ file: FileDescriptor, size: Int64) -> DirectFileReader? {
        guard size >= worthFrom, n11_direct_io_suits(file.rawValue) == 1,
              PageCache.holdsPage(of: file.rawValue, at: size / 2) == false else { return nil }
        return DirectFileReader(file)
    }

    /// Reads `file` directly from its first byte; nil when O_DIRECT cannot be set on it or no
    /// thread is to be had (the file is then read as it is). `file` must stay open and be
    /// read by nobody else until this reader has returned its end or been let go.
    /// `readAt` is `pread` but in the tests.
    init?(_ file: FileDescriptor, blockSize: Int = DirectFileReader.blockSize, blocksAhead: Int = DirectFileReader.blocksAhead,
          readAt: @escaping DirectReadAhead.ReadAt = { pread($0, $1, $2, $3) }) {
        precondition(blockSize > 0 && blockSize % DirectFileWriter.alignment == 0 && blocksAhead > 0)
        guard n11_set_direct_io(file.rawValue, 1) == 0 else { return nil }
        let shared = DirectReadAhead(file: file, blockSize: blockSize, blocksAhead: blocksAhead, readAt: readAt)
        guard let thread = BackgroundThread({ _ in shared.readAhead() }) else {
            _ = n11_set_direct_io(file.rawValue, 0)
            return nil
        }
        self.shared = shared
        self.thread = thread
    }

    deinit { finish() }

    public func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        precondition(offset >= 0 && count >= 0 && offset + count <= buffer.count)
        guard count > 0 else { return 0 }
        while position == available {
            if atLastBlock || thread == nil { return 0 }
            (block, available) = try shared.take(after: block)
            position = 0
            atLastBlock = available < shared.blockSize
            if atLastBlock { finish() }
        }
        let n = min(count, available - position)
        let from = shared.slot(block) + position
        buffer.withUnsafeMutableBytes { to in
            if let base = to.baseAddress { (base + offset).copyMemory(from: from, byteCount: n) }
        }
        position += n
        return n
    }

    /// How many blocks were read around the page cache (for the tests).
    var directReads: Int { shared.directReads }

    /// Stops the thread (after the read it is making) and clears O_DIRECT. Idempotent; the
    /// last block read stays to be copied out.
    private func finish() {
        guard let thread else { return }
        shared.stop()
        thread.stop()
        self.thread = nil
        _ = n11_set_direct_io(shared.file.rawValue, 0)
    }
}

/// What a `DirectFileReader` and its thread share: the aligned blocks, which of them hold a
/// block of the file, and the thread's error. Internal only for the tests' `ReadAt`.
final class DirectReadAhead: @unchecked Sendable {
    /// Reads up to the count at the pointer from the descriptor at the offset, as `pread`.
    typealias ReadAt = (Int32, UnsafeMutableRawPointer, Int, off_t) -> Int
    let file: FileDescriptor
    private let readAt: ReadAt
    let blockSize: Int
    let blocksAhead: Int
    private let memory: UnsafeMutableRawPointer
    private let guarded = LockAndCondition()
    /// Per slot, the bytes of the block read into it, or -1 while it holds none.
    private var filled: [Int]
    /// The block the reader copies out of: the thread reads up to `blocksAhead - 1` past it.
    private var taken = 0
    private var failure: SystemError?
    private var stopping = false
    /// On the thread only, but for `directReads` (read once the thread has stopped).
    private(set) var direct = true
    private(set) var directReads = 0

    init(file: FileDescriptor, blockSize: Int, blocksAhead: Int, readAt: @escaping ReadAt) {
        self.file = file
        self.readAt = readAt
        self.blockSize = blockSize
        self.blocksAhead = blocksAhead
        memory = UnsafeMutableRawPointer.allocate(byteCount: blockSize * blocksAhead, alignment: DirectFileWriter.alignment)
        filled = Array(repeating: -1, count: blocksAhead)
    }

    deinit { memory.deallocate() }

    func slot(_ block: Int) -> UnsafeMutableRawPointer { memory + (block % blocksAhead) * blockSize }

    /// The thread: reads block after block into free slots until the file ends, a read
    /// fails or the reader stops it.
    func readAhead() {
        var block = 0
        while true {
            guarded.lock()
            while !stopping && block >= taken + blocksAhead { guarded.wait() }
            let stop = stopping
            guarded.unlock()
            if stop { return }
            let (count, error) = read(block)
            guarded.lock()
            if let error { failure = error } else { filled[block % blocksAhead] = count }
            guarded.broadcast()
            guarded.unlock()
            if error != nil || count < blockSize { return }
            block += 1
        }
    }

    /// Reads block `block` whole (less only at the end of the file) into its slot.
    private func read(_ block: Int) -> (Int, SystemError?) {
        let base = slot(block)
        let start = off_t(block) * off_t(blockSize)
        var count = 0
        while count < blockSize {
            let n = readAt(file.rawValue, base + count, blockSize - count, start + off_t(count))
            if n < 0 {
                let error = errno
                if error == EINTR { continue }
                if error == EINVAL, direct {
                    direct = false
                    _ = n11_set_direct_io(file.rawValue, 0)
                    continue
                }
                return (count, SystemError("cannot read", path: file.path, errno: error))
            }
            if n == 0 { break }
            count += n
            if direct { directReads += 1 }
            // A direct read ends short only at the end of the file, where the next offset
            // would not be aligned.
            if direct && n % DirectFileWriter.alignment != 0 { break }
        }
        return (count, nil)
    }

    /// Gives the slot of the block after `block` (-1: none yet) back to the thread and waits
    /// for the next block; returns it and its length.
    func take(after block: Int) throws(SystemError) -> (Int, Int) {
        let next = block + 1
        guarded.lock()
        defer { guarded.unlock() }
        if block >= 0 {
            filled[block % blocksAhead] = -1
            taken = next
            guarded.broadcast()
        }
        while filled[next % blocksAhead] < 0 {
            if let failure { throw failure }
            guarded.wait()
        }
        return (next, filled[next % blocksAhead])
    }

    func stop() {
        guarded.lock()
        stopping = true
        guarded.broadcast()
        guarded.unlock()
    }
}
