import Glibc
import Synchronization

/// Runs `work` on batches of paths on a thread of its own and hands the results back batch
/// by batch, in the order the batches were given. `vault add --note` reads its notes there
/// (open, check, read, close: five system calls a note) while its own thread seals the
/// notes before them (issue 34: a million notes). Without a thread (none to be had) `take`
/// does the work itself.
public final class ReadAheadThread<Output: Sendable> {
    /// What the thread and its owner share; the thread holds this, not the owner, so the
    /// owner's `deinit` can stop it.
    private final class Shared: @unchecked Sendable {
        let guarded = LockAndCondition()
        /// Batches given and not yet started, oldest first.
        var waiting: [[String]] = []
        /// Batches done and not yet taken, oldest first.
        var done: [[Output]] = []
        var finished = false
        /// `finished`, read without the lock between the items of a batch.
        let stopping = Atomic<Bool>(false)
        let work: @Sendable (String) -> Output

        init(work: @escaping @Sendable (String) -> Output) { self.work = work }

        func run() {
            while true {
                guarded.lock()
                while !finished && waiting.isEmpty { guarded.wait() }
                if finished { guarded.unlock(); return }
                let batch = waiting.removeFirst()
                guarded.unlock()
                var outputs: [Output] = []
                outputs.reserveCapacity(batch.count)
                // A finish stops the batch too: its results are no longer wanted.
                for path in batch where !stopping.load(ordering: .relaxed) { outputs.append(work(path)) }
                guarded.lock()
                done.append(outputs)
                guarded.broadcast()
                guarded.unlock()
            }
        }
    }

    private let shared: Shared
    private var thread: BackgroundThread?
    /// No thread was to be had: `take` does the work.
    private let inline: Bool
    private var finished = false
    /// Batches given and not yet taken.
    public private(set) var outstanding = 0

    public init(work: @escaping @Sendable (String) -> Output) {
        let shared = Shared(work: work)
        self.shared = shared
        // Stopped by `finished` (it waits on the condition, not on BackgroundThread's flag).
        thread = BackgroundThread { _ in shared.run() }
        inline = thread == nil
    }

    /// Queues `batch` for the thread.
    public func give(_ batch: [String]) {
        shared.guarded.lock()
        shared.waiting.append(batch)
        shared.guarded.broadcast()
        shared.guarded.unlock()
        outstanding += 1
    }

    /// The results of the oldest batch given and not yet taken, in its order; waits for the
    /// thread to finish it.
    public func take() -> [Output] {
        precondition(outstanding > 0 && !finished, "take() with no batch given, or after finish()")
        outstanding -= 1
        shared.guarded.lock()
        defer { shared.guarded.unlock() }
        if inline { return shared.waiting.removeFirst().map(shared.work) }
        while shared.done.isEmpty { shared.guarded.wait() }
        return shared.done.removeFirst()
    }

    /// Stops the thread (after the item it is working on) and waits for it; what was given
    /// and not taken is dropped. Idempotent.
    public func finish() {
        finished = true
        shared.stopping.store(true, ordering: .relaxed)
        shared.guarded.lock()
        shared.finished = true
        shared.guarded.broadcast()
        shared.guarded.unlock()
        thread?.wait()
        thread = nil
    }

    deinit { finish() }
}

/// Hands back `work`'s result for each of a list's paths, in order, while `threads`
/// `ReadAheadThread`s work on the batches after the caller's, taking them in turn: when the
/// caller starts on a batch, the one `threads + 1` after it is given out. At most
/// `threads + 2` batches' results are held (the caller's and those ahead): `work` should keep
/// a result small (`vault add` reads ahead only notes of at most 16 KiB). More than one
/// thread is for work that waits on the disk: each has a read in flight.
///
/// A class: as a struct held in a `lazy var` (as `vault add` holds it), each `next` went
/// through the getter and setter, and letting go of a result copied the whole batch's
/// array (3.5% of the add's thread at 20,000 notes).
public final class ReadAheadPaths<Output: Sendable> {
    public static var batch: Int { HintedPaths.batch }
    private let threads: [ReadAheadThread<Output>]
    /// Batches given out, and taken back: batch n goes to thread n % threads.count.
    private var given = 0, taken = 0
    /// The caller's batch; each result is let go of as it is handed out.
    private var current: [Output?] = []
    private var index = 0
    private var sourceEnded = false
    private var finished = false

    public init(threads count: Int = 1, work: @escaping @Sendable (String) -> Output) {
        precondition(count > 0)
        threads = (0..<count).map { _ in ReadAheadThread(work: work) }
    }

    /// The result for the next path (`source` gives them in order, nil after the last), or
    /// nil after the last; the threads are stopped then.
    public func next(from source: () throws -> String?) rethrows -> Output? {
        guard !finished else { return nil }
        if index == current.count {
            try giveAhead(from: source)
            if given == taken {
                finish()
                return nil
            }
            (current, index) = (threads[taken % threads.count].take(), 0)
            taken += 1
            try giveAhead(from: source)
        }
        defer { index += 1 }
        return current[index].take()
    }

    /// Stops the threads and lets go of every result not handed out (a failed add does not
    /// wait for, or keep, the notes after the one that failed).
    public func finish() {
        finished = true
        current = []
        for thread in threads { thread.finish() }
    }

    /// Gives out batches until `threads + 1` are ahead of the caller's, or the list ends.
    private func giveAhead(from source: () throws -> String?) rethrows {
        while !sourceEnded && given - taken < threads.count + 1 {
            var paths: [String] = []
            paths.reserveCapacity(Self.batch)
            while paths.count < Self.batch, let path = try source() { paths.append(path) }
            if paths.count < Self.batch { sourceEnded = true }
            if !paths.isEmpty {
                threads[given % threads.count].give(paths)
                given += 1
            }
        }
    }
}
