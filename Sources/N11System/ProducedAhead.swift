/// A pass split in two: batches are made on a thread of their own, at most `ahead` of them
/// in front of the thread that uses them. `vault verify` looks up and opens the next batch's
/// catalogue records there while its own thread reads and checks the content files of the
/// batch before (issue 34: at 3,000,000 notes the lookups were a quarter of the pass's
/// thread, the second core half idle).
///
/// Batches reach `consume` in the order `produce` gave them. `consume` returning false or
/// throwing stops `produce` (its `give` returns false: it should return) and `run` returns
/// or rethrows once the producing thread has ended; an error `produce` throws comes back from
/// `run` after the batches given before it were consumed. What `produce` uses, `consume`
/// must not use, unless both take a lock for it. Without a thread (none to be had), `run`
/// produces and consumes on the caller's thread, one batch at a time.
public enum ProducedAhead {
    private final class Shared<Batch>: @unchecked Sendable {
        let guarded = LockAndCondition()
        var ready: [Batch] = []
        var produced = false
        var failure: (any Error)?
        var stopped = false
    }

    public static func run<Batch>(ahead: Int = 1, produce: @escaping (_ give: (Batch) -> Bool) throws -> Void,
                                  consume: (Batch) throws -> Bool) throws {
        precondition(ahead > 0)
        let shared = Shared<Batch>()
        let thread = BackgroundThread { _ in
            var failure: (any Error)?
            do {
                try produce { batch in
                    shared.guarded.lock()
                    defer { shared.guarded.unlock() }
                    while shared.ready.count >= ahead && !shared.stopped { shared.guarded.wait() }
                    guard !shared.stopped else { return false }
                    shared.ready.append(batch)
                    shared.guarded.broadcast()
                    return true
                }
            } catch { failure = error }
            shared.guarded.lock()
            (shared.produced, shared.failure) = (true, failure)
            shared.guarded.broadcast()
            shared.guarded.unlock()
        }
        guard let thread else { return try inline(produce: produce, consume: consume) }
        defer {
            shared.guarded.lock()
            shared.stopped = true
            shared.guarded.broadcast()
            shared.guarded.unlock()
            thread.wait()
        }
        while true {
            shared.guarded.lock()
            while shared.ready.isEmpty && !shared.produced { shared.guarded.wait() }
            guard !shared.ready.isEmpty else {
                let failure = shared.failure
                shared.guarded.unlock()
                if let failure { throw failure }
                return
            }
            let batch = shared.ready.removeFirst()
            shared.guarded.broadcast()
            shared.guarded.unlock()
            guard try consume(batch) else { return }
        }
    }

    private static func inline<Batch>(produce: (_ give: (Batch) -> Bool) throws -> Void, consume: (Batch) throws -> Bool) throws {
        var consumeFailure: (any Error)?, stopped = false
        do {
            try withoutActuallyEscaping(consume) { consume in
                try produce { batch in
                    guard !stopped else { return false }
                    do { stopped = try !consume(batch) } catch { (consumeFailure, stopped) = (error, true) }
                    return !stopped
                }
            }
        } catch {
            // A producer that throws once told to stop: the consumer's error is the one that counts.
            throw consumeFailure ?? error
        }
        if let consumeFailure { throw consumeFailure }
    }
}
