import Glibc
import Synchronization
import Testing
import N11System

private struct Failed: Error, Equatable { let at: Int }

/// What the producing thread did, seen from the test's thread.
private final class Produced: Sendable {
    private let given = Mutex<[Int]>([])
    private let thread = Mutex<UInt?>(nil)
    private let refused = Mutex<Int>(0)

    func gave(_ batch: Int, accepted: Bool) {
        given.withLock { $0.append(batch) }
        thread.withLock { $0 = UInt(pthread_self()) }
        if !accepted { refused.withLock { $0 += 1 } }
    }

    var batches: [Int] { given.withLock { $0 } }
    var threadID: UInt? { thread.withLock { $0 } }
    var refusals: Int { refused.withLock { $0 } }
}

@Suite("ProducedAhead: batches made on another thread, used in order, a bounded number ahead")
struct ProducedAheadTests {
    @Test("every batch reaches consume once, in order, made on another thread and never more than `ahead` in front")
    func inOrderAndBounded() throws {
        let produced = Produced()
        var seen: [Int] = []
        try ProducedAhead.run(ahead: 2, produce: { give in
            for batch in 0..<500 { produced.gave(batch, accepted: give(batch)) }
        }, consume: { (batch: Int) in
            seen.append(batch)
            if batch % 100 == 0 {
                // While this one is used, the producer gives two more and waits in the third give.
                usleep(30_000)
                #expect(produced.batches.count <= batch + 3, "\(produced.batches.count) batches made while \(batch) was used")
            }
            return true
        })
        #expect(seen == Array(0..<500))
        #expect(produced.threadID != nil && produced.threadID != UInt(pthread_self()))
        #expect(produced.refusals == 0)
    }

    @Test("with `ahead` 2, two batches are made while the one before them is used (not one)")
    func makesAsManyAsAsked() throws {
        let produced = Produced()
        var waited = 0
        try ProducedAhead.run(ahead: 2, produce: { give in
            for batch in 0..<5 { produced.gave(batch, accepted: give(batch)) }
        }, consume: { (batch: Int) in
            if batch == 0 {
                // Batches 1 and 2 fit while 0 is held; with one batch ahead only 1 would.
                while produced.batches.count < 3 && waited < 5_000 { usleep(1_000); waited += 1 }
                #expect(produced.batches.count == 3, "\(produced.batches.count) batches made while the first was used")
            }
            return true
        })
        #expect(produced.batches == Array(0..<5))
    }

    @Test("consume returning false or throwing stops the producer (give returns false) and ends run")
    func consumerStops() throws {
        for throwing in [false, true] {
            let produced = Produced()
            var seen: [Int] = []
            do {
                try ProducedAhead.run(produce: { give in
                    for batch in 0..<10_000 {
                        let accepted = give(batch)
                        produced.gave(batch, accepted: accepted)
                        if !accepted { return }
                    }
                }, consume: { (batch: Int) in
                    seen.append(batch)
                    if batch == 5 {
                        if throwing { throw Failed(at: batch) }
                        return false
                    }
                    return true
                })
                #expect(!throwing, "the consumer's error was lost")
            } catch {
                #expect(throwing && error as? Failed == Failed(at: 5), "\(error)")
            }
            #expect(seen == Array(0...5))
            #expect(produced.refusals == 1 && produced.batches.count < 10, "\(produced.batches.count) batches made")
        }
    }

    @Test("an error the producer throws comes back from run after the batches given before it")
    func producerFails() throws {
        var seen: [Int] = []
        #expect(throws: Failed(at: 3)) {
            try ProducedAhead.run(produce: { give in
                for batch in 0..<3 { _ = give(batch) }
                throw Failed(at: 3)
            }, consume: { (batch: Int) in
                seen.append(batch)
                return true
            })
        }
        #expect(seen == [0, 1, 2])
        // Nothing produced: run returns at once.
        try ProducedAhead.run(produce: { _ in }, consume: { (_: Int) in
            Issue.record("a batch that was never given")
            return true
        })
    }
}
