import Glibc
import Synchronization

/// A job on a thread of its own, told to stop when its owner is done with it: `stop()`
/// (or the owner letting go of it) sets a flag the job looks at between steps, and waits
/// for the thread to end. For work beside a pass that the pass does not wait for
/// (`CatalogueWarmer`); what the job captures is its alone until it has ended.
public final class BackgroundThread {
    private final class Job: @unchecked Sendable {
        let stopped = Atomic<Bool>(false)
        let body: (_ stopped: () -> Bool) -> Void
        init(_ body: @escaping (_ stopped: () -> Bool) -> Void) { self.body = body }
        func run() { body { self.stopped.load(ordering: .relaxed) } }
    }

    private let job: Job
    private var thread: pthread_t?

    /// Starts `body` on a new thread; nil when no thread is to be had. `body` is given a
    /// function that tells whether it should stop.
    public init?(_ body: @escaping (_ stopped: () -> Bool) -> Void) {
        job = Job(body)
        var id = pthread_t()
        let context = Unmanaged.passRetained(job).toOpaque()
        guard pthread_create(&id, nil, { raw in
            Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, context) == 0 else {
            Unmanaged<Job>.fromOpaque(context).release()
            return nil
        }
        thread = id
    }

    /// Tells the job to stop and waits for its thread to end. Idempotent.
    public func stop() {
        job.stopped.store(true, ordering: .relaxed)
        wait()
    }

    /// Tells the job to stop and lets its thread end by itself, without waiting: for a
    /// failure's way out, where the job may be in a step that takes long (a syncfs of a
    /// slow disk) and nothing depends on its end. What it captured goes with it.
    public func stopWithoutWaiting() {
        job.stopped.store(true, ordering: .relaxed)
        if let thread {
            pthread_detach(thread)
            self.thread = nil
        }
    }

    /// Waits for the job to end by itself.
    public func wait() {
        if let thread {
            pthread_join(thread, nil)
            self.thread = nil
        }
    }

    deinit { stop() }
}

public enum MachineMemory {
    /// The machine's memory in bytes (0 if it cannot be told). A container's limit is not
    /// seen here.
    public static var physicalBytes: Int {
        let pages = sysconf(Int32(_SC_PHYS_PAGES)), pageSize = sysconf(Int32(_SC_PAGESIZE))
        return pages > 0 && pageSize > 0 ? pages * pageSize : 0
    }
}

/// A mutex with one condition variable, for the state a thread shares with its owner
/// (`HintThread`, `SerialWorker`): both are allocated once, at fixed addresses, as pthreads need.
public final class LockAndCondition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }
    /// Sleeps until signalled, the lock given up meanwhile (held on entry and on return).
    public func wait() { pthread_cond_wait(condition, mutex) }
    public func signal() { pthread_cond_signal(condition) }
    public func broadcast() { pthread_cond_broadcast(condition) }
}
