import Glibc
import Synchronization

/// Runs jobs one after another on a thread of its own, in the order they were given, while
/// the thread that gives them goes on: `vault add` has its content files created and written
/// here while it reads, checks and seals the next notes (issue 34: creating a file is about a
/// third of a note's time, and the add used one core).
///
/// Jobs are handed over `batchSize` at a time, so the two threads meet once a batch, not once
/// a job (a wake-up per small item made both switch context for every one, as `ReadAhead`
/// found); at most `batchesAhead` batches wait, so memory is bounded by what that many jobs
/// hold. The first job that throws ends the work: the jobs after it never run, and its error
/// comes back from the `submit` that next hands a batch over, or from `waitUntilDone` or
/// `finish`. A job must not touch what the giving thread uses until `waitUntilDone`, `finish`
/// or `cancel` has returned, unless both take a lock for it.
public final class SerialWorker {
    public typealias Job = @Sendable () throws -> Void

    /// What the thread and its owner share; the thread holds this, not the owner.
    private final class Shared: @unchecked Sendable {
        let guarded = LockAndCondition()
        var waiting: [[Job]] = []
        /// Whether the thread is running a batch it took (so "nothing waiting" is not "done").
        var busy = false
        var failure: (any Error)?
        var ending = false
        var cancelled = false
        /// `cancelled`, read between the jobs of a batch without the lock.
        let stopNow = Atomic<Bool>(false)

        func run() {
            guarded.lock()
            while true {
                while waiting.isEmpty && !ending && !cancelled { guarded.wait() }
                if cancelled || waiting.isEmpty { break }
                let batch = waiting.removeFirst()
                busy = true
                // The giver may be waiting for room.
                guarded.broadcast()
                guarded.unlock()
                var thrown: (any Error)?
                for job in batch {
                    if stopNow.load(ordering: .relaxed) { break }
                    do { try job() } catch { thrown = error; break }
                }
                guarded.lock()
                busy = false
                if let thrown {
                    failure = thrown
                    // Nothing after a failed job runs.
                    waiting.removeAll()
                    cancelled = true
                }
                guarded.broadcast()
            }
            guarded.broadcast()
            guarded.unlock()
        }
    }

    private let shared = Shared()
    private var thread: pthread_t?
    private let batchSize: Int
    private let batchesAhead: Int
    private var outgoing: [Job] = []

    /// Starts the thread; nil when no thread is to be had (then do the work in place).
    public init?(batchSize: Int = 64, batchesAhead: Int = 4) {
        precondition(batchSize > 0 && batchesAhead > 0)
        self.batchSize = batchSize
        self.batchesAhead = batchesAhead
        outgoing.reserveCapacity(batchSize)
        var id = pthread_t()
        let context = Unmanaged.passRetained(shared).toOpaque()
        guard pthread_create(&id, nil, { raw in
            Unmanaged<Shared>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, context) == 0 else {
            Unmanaged<Shared>.fromOpaque(context).release()
            return nil
        }
        thread = id
    }

    deinit { cancel() }

    /// Queues `job`; waits only while `batchesAhead` batches are waiting. Throws the error
    /// of a job that failed earlier (`job` is then not queued).
    public func submit(_ job: @escaping Job) throws {
        // Traps here, not a batch later: a job given after the end would never run.
        precondition(thread != nil, "a job given to a SerialWorker that was finished or cancelled")
        outgoing.append(job)
        if outgoing.count >= batchSize { try handOver() }
    }

    /// Waits until every job given so far has run; throws the first one's error, if any.
    /// The thread stays for more jobs. After `cancel` it returns at once: the jobs dropped
    /// did not run, and only a job's failure is reported.
    public func waitUntilDone() throws {
        try handOver()
        shared.guarded.lock()
        while shared.failure == nil && !shared.cancelled
            && (shared.busy || !shared.waiting.isEmpty) {
            shared.guarded.wait()
        }
        let failure = shared.failure
        shared.guarded.unlock()
        if let failure { throw failure }
    }

    /// Hands over what is queued, then waits until at most `pending` of the jobs given so far
    /// have not finished (running or waiting); throws the first failed one's error. Only for
    /// batches of one job (a batch running counts as one): a caller that cycles through
    /// buffers, one job each, so learns which buffers are free again (`DirectWriteBuffers`).
    public func waitUntil(atMostPending pending: Int) throws {
        precondition(batchSize == 1, "pending jobs are counted by batch")
        try handOver()
        shared.guarded.lock()
        while shared.failure == nil && !shared.cancelled
            && shared.waiting.reduce(shared.busy ? 1 : 0, { $0 + $1.count }) > pending {
            shared.guarded.wait()
        }
        let failure = shared.failure
        shared.guarded.unlock()
        if let failure { throw failure }
    }

    /// Runs every job given, ends the thread and waits for it; throws the first job's error.
    public func finish() throws {
        defer { end(cancelling: false) }
        try waitUntilDone()
    }

    /// Drops the jobs that have not started, waits for the one running, ends the thread.
    /// Idempotent; the worker takes no jobs after it.
    public func cancel() {
        outgoing.removeAll()
        end(cancelling: true)
    }

    private func handOver() throws {
        guard !outgoing.isEmpty else { return try rethrowFailure() }
        precondition(thread != nil, "a job given to a SerialWorker that was finished or cancelled")
        shared.guarded.lock()
        while shared.failure == nil && !shared.cancelled && shared.waiting.count >= batchesAhead {
            shared.guarded.wait()
        }
        if let failure = shared.failure {
            shared.guarded.unlock()
            outgoing.removeAll()
            throw failure
        }
        shared.waiting.append(outgoing)
        shared.guarded.broadcast()
        shared.guarded.unlock()
        outgoing.removeAll(keepingCapacity: true)
    }

    private func rethrowFailure() throws {
        shared.guarded.lock()
        let failure = shared.failure
        shared.guarded.unlock()
        if let failure { throw failure }
    }

    private func end(cancelling: Bool) {
        guard let thread else { return }
        shared.guarded.lock()
        if cancelling {
            shared.cancelled = true
            shared.stopNow.store(true, ordering: .relaxed)
            shared.waiting.removeAll()
        }
        shared.ending = true
        shared.guarded.broadcast()
        shared.guarded.unlock()
        pthread_join(thread, nil)
        self.thread = nil
    }
}

/// Jobs whose order does not matter, run on `threads` `SerialWorker`s that take batches in
/// turn: files made by a vault change or an export. Started by the first job; without a
/// thread to be had, jobs run on the caller's thread. One thread by default: two writer
/// threads into `Notes/` were not reliably faster and twice much slower (BENCHMARKS.md,
/// "Small items' files made beside the restore"). Errors as `SerialWorker`'s: a
/// thread's first comes back from the next `submit` that hands that thread a batch, or from
/// `waitUntilDone` or `finish` (which report the first thread's before the next one's).
public struct SerialWorkerPool {
    private let threads: Int
    private let batchSize: Int
    private let batchesAhead: Int
    private var workers: [SerialWorker] = []
    private var started = false
    /// Set by `finish` and `cancel`: no job may follow (it would start new threads).
    private var ended = false
    private var submitted = 0

    /// Holds at most (`batchesAhead` + 1) × `threads` + 1 batches of jobs.
    public init(threads: Int = 1, batchSize: Int = 64, batchesAhead: Int = 4) {
        precondition(threads > 0)
        self.threads = threads
        self.batchSize = batchSize
        self.batchesAhead = batchesAhead
    }

    public mutating func submit(_ job: @escaping SerialWorker.Job) throws {
        precondition(!ended, "a job given to a SerialWorkerPool that was finished or cancelled")
        if !started {
            started = true
            workers = (0..<threads).compactMap { _ in
                SerialWorker(batchSize: batchSize, batchesAhead: batchesAhead)
            }
        }
        guard !workers.isEmpty else { return try job() }
        let worker = workers[(submitted / batchSize) % workers.count]
        submitted += 1
        try worker.submit(job)
    }

    /// Waits for every job given so far; throws the first error of any thread.
    public func waitUntilDone() throws { try eachWorker { try $0.waitUntilDone() } }

    /// Runs every job given and ends the threads; throws the first error of any thread.
    public mutating func finish() throws {
        ended = true
        try eachWorker { try $0.finish() }
    }

    /// Drops the jobs that have not started and waits for those running.
    public mutating func cancel() {
        ended = true
        for worker in workers { worker.cancel() }
    }

    private func eachWorker(_ body: (SerialWorker) throws -> Void) throws {
        var failure: (any Error)?
        for worker in workers {
            do { try body(worker) } catch { if failure == nil { failure = error } }
        }
        if let failure { throw failure }
    }
}
