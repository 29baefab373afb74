import Foundation
import Glibc
import Synchronization
import Testing
import N11System

/// Hands the worker to a second thread that gives jobs while the test thread does not.
private final class Giving: @unchecked Sendable {
    let worker: SerialWorker
    init(_ worker: SerialWorker) { self.worker = worker }
}

private struct JobFailed: Error, Equatable { let index: Int }

/// What the worker's jobs did, seen from the test's thread.
private final class Record: Sendable {
    private let ran = Mutex<[Int]>([])
    private let threads = Mutex<Set<UInt>>([])

    func job(_ index: Int) {
        ran.withLock { $0.append(index) }
        threads.withLock { _ = $0.insert(UInt(pthread_self())) }
    }

    var indices: [Int] { ran.withLock { $0 } }
    var threadIDs: Set<UInt> { threads.withLock { $0 } }
}

@Suite("SerialWorker: jobs in order on another thread, the first error ends the rest")
struct SerialWorkerTests {
    @Test("every job runs once, in the order given, on one thread that is not the giver's; waitUntilDone means done")
    func runsInOrder() throws {
        let worker = try #require(SerialWorker(batchSize: 7, batchesAhead: 2))
        let record = Record()
        for index in 0..<1000 { try worker.submit { record.job(index) } }
        // A partial batch (1000 is no multiple of 7) is handed over by the wait.
        try worker.waitUntilDone()
        #expect(record.indices == Array(0..<1000))
        for index in 1000..<1010 { try worker.submit { record.job(index) } }
        try worker.finish()
        #expect(record.indices == Array(0..<1010))
        #expect(record.threadIDs.count == 1)
        #expect(!record.threadIDs.contains(UInt(pthread_self())))
    }

    @Test("a failed job: the jobs after it never run, and its error comes back from the next submit and from finish")
    func failureEndsTheRest() throws {
        let worker = try #require(SerialWorker(batchSize: 4, batchesAhead: 1))
        let record = Record()
        var thrownBySubmit: (any Error)?
        for index in 0..<10_000 {
            do {
                try worker.submit {
                    if index == 10 { throw JobFailed(index: index) }
                    record.job(index)
                }
            } catch {
                thrownBySubmit = error
                break
            }
        }
        #expect(thrownBySubmit as? JobFailed == JobFailed(index: 10), "one batch ahead: submit sees the failure long before 10,000")
        #expect(record.indices == Array(0..<10))
        #expect(throws: JobFailed(index: 10)) { try worker.waitUntilDone() }
        #expect(throws: JobFailed(index: 10)) { try worker.finish() }
        #expect(record.indices == Array(0..<10))
    }

    @Test("the giver waits while the batches ahead are full: the batch running, batchesAhead waiting and one filling")
    func bounded() throws {
        let worker = try #require(SerialWorker(batchSize: 3, batchesAhead: 2))
        let gate = Mutex(false), record = Record()
        let submitted = Atomic<Int>(0)
        // The first job holds the thread until the gate opens.
        try worker.submit {
            while !gate.withLock({ $0 }) { usleep(1000) }
            record.job(0)
        }
        let giving = Giving(worker)
        let giver = Thread {
            for index in 1..<30 {
                try? giving.worker.submit { record.job(index) }
                submitted.store(index, ordering: .releasing)
            }
        }
        giver.start()
        // The giver stops once it is blocked: wait until the count holds still for 100 ms.
        var seen = -1
        for _ in 0..<100 {
            let now = submitted.load(ordering: .acquiring)
            if now == seen && now > 0 { break }
            seen = now
            usleep(100_000)
        }
        // Jobs 0–2 are running, 3–8 wait, 9 and 10 fill the next batch; 11's submit waits.
        #expect(seen == 10, "the giver stopped after filling what may wait: \(seen)")
        gate.withLock { $0 = true }
        // Acquiring the giver's last store: its writes to the worker come before `finish`.
        while submitted.load(ordering: .acquiring) < 29 { usleep(1000) }
        try worker.finish()
        #expect(record.indices == Array(0..<30))
    }

    @Test("waitUntil(atMostPending:) returns once no more than that many jobs are left, not before and not only at the end")
    func waitsForPending() throws {
        let worker = try #require(SerialWorker(batchSize: 1, batchesAhead: 8))
        let released = Atomic<Int>(0), record = Record()
        // Job i runs once the test has released more than i jobs.
        for index in 0..<6 {
            try worker.submit {
                while released.load(ordering: .acquiring) <= index { usleep(1000) }
                record.job(index)
            }
        }
        let giving = Giving(worker)
        let doneWhenReturned = Atomic<Int>(-1)
        let waiter = Thread {
            try? giving.worker.waitUntil(atMostPending: 2)
            doneWhenReturned.store(record.indices.count, ordering: .releasing)
        }
        waiter.start()
        /// Polls for up to `seconds` until the waiter has returned; its count of jobs done then.
        func returned(within seconds: Int) -> Int {
            for _ in 0..<(seconds * 1000) where doneWhenReturned.load(ordering: .acquiring) < 0 { usleep(1000) }
            return doneWhenReturned.load(ordering: .acquiring)
        }
        for release in 1...6 {
            released.store(release, ordering: .releasing)
            for _ in 0..<2000 where record.indices.count < release { usleep(1000) }
            if release < 4 {
                usleep(50_000)
                #expect(doneWhenReturned.load(ordering: .acquiring) == -1, "returned with \(6 - release) jobs left")
            }
            if release == 4 { #expect(returned(within: 10) == 4, "still waiting with 2 jobs left") }
        }
        // A wait that never ends fails here instead of hanging the run (the worker is then
        // cancelled, which wakes it).
        if returned(within: 10) < 0 {
            Issue.record("waitUntil(atMostPending:) did not return once every job had run")
            worker.cancel()
            while doneWhenReturned.load(ordering: .acquiring) < 0 { usleep(1000) }
            return
        }
        try worker.finish()
        #expect(record.indices == Array(0..<6))
    }

    @Test("cancel drops the jobs not started, those of the running batch too, and ends the thread")
    func cancelDropsWaitingJobs() throws {
        let worker = try #require(SerialWorker(batchSize: 3, batchesAhead: 4))
        let gate = Mutex(false), started = Atomic<Bool>(false), record = Record()
        try worker.submit {
            started.store(true, ordering: .relaxed)
            while !gate.withLock({ $0 }) { usleep(1000) }
            record.job(0)
        }
        // 1 and 2 share the running batch; 3–8 wait in two more.
        for index in 1...8 { try worker.submit { record.job(index) } }
        while !started.load(ordering: .relaxed) { usleep(1000) }
        let opener = Thread {
            usleep(50_000)
            gate.withLock { $0 = true }
        }
        opener.start()
        worker.cancel()
        #expect(record.indices == [0], "only the job that had started ran")
        worker.cancel()
    }
}
