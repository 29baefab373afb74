import Glibc

/// Reads a sequence of byte streams on a second thread, in order, a bounded number of blocks
/// ahead of the consumer. Creating an archive pulls every vault item through read → decrypt
/// → hash → re-encrypt while libzip checksums and writes; restoring pulls every entry through
/// read → decrypt while the caller hashes, re-encrypts and writes. With this between the two
/// halves each runs on its own core (DESIGN.md §4, two-core pipeline).
///
/// The producer side is `open(i)` plus reads of the source it returns, all on the worker
/// thread; the consumer reads `stream(i)` for i = 0, 1, 2, … each to its end, on one other
/// thread. Whatever `open` captures must not be used by anyone else until `finish()`. Memory
/// is bounded by `blocks × blockSize`, and what `open` holds per stream by `streamsAhead`
/// (a stream takes at least a block, so short streams would otherwise be opened 16 ahead);
/// used block bytes are wiped before a block is reused, since blocks may carry plaintext.
public final class ReadAhead: @unchecked Sendable {
    public typealias Opener = (Int) throws -> ByteSource

    /// One filled block: bytes of stream `stream`, the last ones of it if `isEnd`.
    private final class Block {
        var bytes: [UInt8]
        var count = 0
        var consumed = 0
        var stream = 0
        var isEnd = false
        init(size: Int) { bytes = [UInt8](repeating: 0, count: size) }
    }

    private let count: Int
    private let open: Opener
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var free: [Block]
    private var filled: [Block] = []
    private var filledStart = 0
    /// Set by the worker when `open` or a read threw; handed to the consumer of that stream.
    private var failure: (stream: Int, error: any Error)?
    private var cancelled = false
    private var producerDone = false
    private var thread: pthread_t?
    /// Who sleeps on `changed`. A sleeper is woken only once half the blocks are ready for
    /// it: a wake-up per block made both threads switch context for every small item.
    private var consumerWaiting = false
    private var producerWaiting = false
    /// The producer sleeps for `streamsAhead` (a stream read to its end wakes it), not for a
    /// free block (half the blocks free wake it). Waking it at every stream's end whatever
    /// it waited for made both threads switch context for every small item (issue 29).
    private var producerWaitsToOpen = false
    private let wakeBatch: Int
    /// The most streams opened and not yet read to their end.
    private let streamsAhead: Int
    /// Streams the consumer has read to their end.
    private var streamsRead = 0

    public init(count: Int, blockSize: Int = 256 << 10, blocks: Int = 8, streamsAhead: Int = .max, open: @escaping Opener) {
        precondition(streamsAhead >= 1)
        self.count = count
        self.open = open
        self.streamsAhead = streamsAhead
        free = (0..<max(2, blocks)).map { _ in Block(size: blockSize) }
        wakeBatch = max(1, max(2, blocks) / 2)
        pthread_mutex_init(lock, nil)
        pthread_cond_init(changed, nil)
    }

    deinit {
        finish()
        for block in free + filled { block.bytes.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) } }
        pthread_cond_destroy(changed)
        pthread_mutex_destroy(lock)
        lock.deallocate()
        changed.deallocate()
    }

    /// Starts the worker thread.
    public func start() throws(SystemError) {
        precondition(thread == nil)
        var id = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&id, nil, { raw in
            let me = Unmanaged<ReadAhead>.fromOpaque(raw!).takeRetainedValue()
            me.produceAll()
            return nil
        }, context)
        guard rc == 0 else {
            Unmanaged<ReadAhead>.fromOpaque(context).release()
            throw SystemError("cannot start a worker thread", errno: rc)
        }
        thread = id
    }

    /// Stops the worker (it finishes the block it is filling) and waits for it. Idempotent.
    public func finish() {
        locked { cancelled = true; pthread_cond_broadcast(changed) }
        if let thread {
            pthread_join(thread, nil)
            self.thread = nil
        }
    }

    /// The consumer's view of stream `index`.
    public func stream(_ index: Int) -> ByteSource { Stream(self, index: index) }

    private final class Stream: ByteSource {
        private let owner: ReadAhead
        private let index: Int
        /// Once the end was reported the stream's blocks are gone: later reads stay at the end.
        private var ended = false
        init(_ owner: ReadAhead, index: Int) { self.owner = owner; self.index = index }
        func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
            if ended || count == 0 { return 0 }
            let n = try owner.read(stream: index, into: &buffer, offset: offset, count: count)
            if n == 0 { ended = true }
            return n
        }
    }

    // MARK: worker

    private func produceAll() {
        for index in 0..<count {
            guard waitForRoom(toOpen: index) else { return }
            do {
                let source = try open(index)
                var done = false
                while !done {
                    guard let block = takeFreeBlock() else { return }
                    // A short fill means the source ended; a full one may be followed by an
                    // empty end block.
                    let n = try source.readFully(into: &block.bytes, count: block.bytes.count)
                    block.count = n
                    block.consumed = 0
                    block.stream = index
                    block.isEnd = n < block.bytes.count
                    done = block.isEnd
                    let wake = locked {
                        filled.append(block)
                        return consumerWaiting && filled.count - filledStart >= wakeBatch
                    }
                    if wake { pthread_cond_broadcast(changed) }
                }
            } catch {
                locked {
                    failure = (index, error)
                    pthread_cond_broadcast(changed)
                }
                return
            }
        }
        locked {
            producerDone = true
            pthread_cond_broadcast(changed)
        }
    }

    /// Waits until stream `index` is fewer than `streamsAhead` past the one being read;
    /// false once cancelled.
    private func waitForRoom(toOpen index: Int) -> Bool {
        locked {
            while index - streamsRead >= streamsAhead && !cancelled {
                if consumerWaiting { pthread_cond_broadcast(changed) }
                producerWaiting = true
                producerWaitsToOpen = true
                pthread_cond_wait(changed, lock)
                producerWaiting = false
                producerWaitsToOpen = false
            }
            return !cancelled
        }
    }

    private func takeFreeBlock() -> Block? {
        locked {
            if free.isEmpty {
                // Everything is filled: the reader must get going before we can.
                if consumerWaiting { pthread_cond_broadcast(changed) }
                producerWaiting = true
                while free.isEmpty && !cancelled { pthread_cond_wait(changed, lock) }
                producerWaiting = false
            }
            return cancelled ? nil : free.removeLast()
        }
    }

    // MARK: consumer

    private func read(stream index: Int, into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        while true {
            let block: Block = try locked {
                while filledStart == filled.count {
                    if let failure, failure.stream == index { throw failure.error }
                    if failure != nil || cancelled || producerDone || thread == nil {
                        throw SystemError("the read-ahead worker stopped", errno: ECANCELED)
                    }
                    // Nothing to read: the worker must not sleep waiting for room meanwhile.
                    if producerWaiting { pthread_cond_broadcast(changed) }
                    consumerWaiting = true
                    pthread_cond_wait(changed, lock)
                    consumerWaiting = false
                }
                return filled[filledStart]
            }
            // Reading streams out of order is a bug of the caller, not a data error.
            precondition(block.stream == index, "ReadAhead: stream \(index) read while stream \(block.stream) is next")
            let n = min(count, block.count - block.consumed)
            if n > 0 {
                buffer.withUnsafeMutableBufferPointer { dst in
                    block.bytes.withUnsafeBufferPointer { src in
                        (dst.baseAddress! + offset).update(from: src.baseAddress! + block.consumed, count: n)
                    }
                }
                block.consumed += n
                // A drained end block stays until the read that reports the end.
                if block.consumed == block.count && !block.isEnd { recycle(block) }
                return n
            }
            // Read the flag first: once recycled, the worker may refill the block at once.
            let wasEnd = block.isEnd
            recycle(block, endsStream: wasEnd)
            if wasEnd { return 0 }
        }
    }

    private func recycle(_ block: Block, endsStream: Bool = false) {
        block.bytes.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, block.count) }
        let wake = locked {
            filledStart += 1
            if filledStart > 64 { filled.removeFirst(filledStart); filledStart = 0 }
            free.append(block)
            if endsStream { streamsRead += 1 }
            return producerWaiting && (free.count >= wakeBatch || (endsStream && producerWaitsToOpen))
        }
        if wake { pthread_cond_broadcast(changed) }
    }

    /// The hand-overs of blocks wake the other thread after the lock is let go: woken inside
    /// it, the other thread could run at once on this core and then sleep on the lock this
    /// thread still held (a mixed-set restore's thread waited 0.13–0.17 s of 1.6 s in
    /// `recycle`'s lock). That took the restore's context switches from 4,600–5,200 to
    /// 3,900–4,300, not its time: on two cores it now waits to be scheduled instead (issue
    /// 29). The flags read under the lock say the other thread is waiting, and it checks its
    /// condition under the lock before it waits, so a wake-up after the unlock is not lost.
    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        return try body()
    }
}

/// Several `ReadAhead` workers taking turns: stream i is produced by lane i % lanes, so
/// producing runs on as many threads as there are lanes while the consumer still reads
/// every stream in order. For producers that are the slower half and whose streams are
/// independent: creating an archive re-encrypts each vault item on its own. `makeOpener`
/// is called once per lane, so each lane has its own state (key buffers); whatever the
/// openers share must be safe to read from several threads.
public final class ReadAheadLanes: @unchecked Sendable {
    private let lanes: [ReadAhead]

    public init(count: Int, lanes laneCount: Int, streamsAhead: Int = .max, makeOpener: (Int) -> ReadAhead.Opener) {
        let n = max(1, laneCount)
        lanes = (0..<n).map { lane in
            let open = makeOpener(lane)
            // Lane `lane` produces streams lane, lane + n, lane + 2n, …, up to 5 MiB ahead:
            // with 2 MiB (one photo) a lane stalled until the writer drained its last item
            // (measured: version 2 create on the mixed set 1.90 s → 1.78 s, medians of 6).
            // Version 3 create's streams are segments of 1 MiB or a little more (a photo is
            // a segment of its own): 5 MiB lets a lane be two or more of them ahead.
            return ReadAhead(count: (count - lane + n - 1) / n, blocks: 20, streamsAhead: streamsAhead) { local in try open(lane + local * n) }
        }
    }

    public func start() throws(SystemError) {
        for lane in lanes { try lane.start() }
    }

    /// Stops every worker and waits for them. Idempotent.
    public func finish() {
        for lane in lanes { lane.finish() }
    }

    /// The consumer's view of stream `index`; streams are read in order, each to its end.
    public func stream(_ index: Int) -> ByteSource {
        lanes[index % lanes.count].stream(index / lanes.count)
    }
}
