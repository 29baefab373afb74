import Foundation
import Glibc
import Testing
import N11System

/// A source that hands out its bytes in reads of at most `step` bytes, or fails after `failAfter`.
private final class StepSource: ByteSource {
    private let bytes: [UInt8]
    private let step: Int
    private let failAfter: Int?
    private var position = 0

    init(_ bytes: [UInt8], step: Int, failAfter: Int? = nil) {
        self.bytes = bytes
        self.step = step
        self.failAfter = failAfter
    }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        if let failAfter, position >= failAfter { throw SystemError("simulated read failure", path: "stream", errno: EIO) }
        let n = min(count, step, bytes.count - position)
        buffer.replaceSubrange(offset..<(offset + n), with: bytes[position..<(position + n)])
        position += n
        return n
    }
}

private func content(_ index: Int, length: Int) -> [UInt8] {
    (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index &* 7) }
}

private func drain(_ source: ByteSource, readSize: Int) throws -> [UInt8] {
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: readSize)
    while true {
        let n = try source.read(into: &buffer, offset: 0, count: readSize)
        if n == 0 { return out }
        out += buffer[0..<n]
    }
}

@Suite("ReadAhead: streams produced on a second thread")
struct ReadAheadTests {
    @Test("every stream arrives whole and in order, whatever its length against the block size")
    func streamsArriveWhole() throws {
        // Lengths around the block size: empty, short, exactly one block, one block + 1, many blocks.
        let blockSize = 1024
        let lengths = [0, 1, 100, blockSize - 1, blockSize, blockSize + 1, 5 * blockSize, 5 * blockSize + 7, 0, 3]
        let ahead = ReadAhead(count: lengths.count, blockSize: blockSize, blocks: 2) { index in
            StepSource(content(index, length: lengths[index]), step: 300)
        }
        try ahead.start()
        defer { ahead.finish() }
        for (index, length) in lengths.enumerated() {
            let stream = ahead.stream(index)
            #expect(try drain(stream, readSize: 700) == content(index, length: length), "stream \(index)")
            // After its end a stream stays at its end and does not touch the next stream.
            var probe = [UInt8](repeating: 0, count: 1)
            #expect(try stream.read(into: &probe, offset: 0, count: 1) == 0)
        }
    }

    @Test("thousands of streams ending on block boundaries, with the worker racing to refill each recycled block")
    func endBlocksUnderContention() throws {
        // A stream of exactly one block is followed by an empty end block. The reader once
        // looked at an end block's flag after handing the block back, when the worker could
        // already have refilled it for the next stream: streams then got out of step.
        let blockSize = 256
        let lengths = (0..<4000).map { [blockSize, 0, 1, 2 * blockSize, blockSize - 1][$0 % 5] }
        let ahead = ReadAhead(count: lengths.count, blockSize: blockSize, blocks: 2) { index in
            StepSource(content(index, length: lengths[index]), step: blockSize)
        }
        try ahead.start()
        defer { ahead.finish() }
        for (index, length) in lengths.enumerated() {
            let got = try drain(ahead.stream(index), readSize: blockSize)
            guard got == content(index, length: length) else {
                Issue.record("stream \(index) differs")
                return
            }
        }
    }

    @Test("a failure while producing reaches the reader of that stream, after the bytes before it")
    func failureReachesItsStream() throws {
        let ahead = ReadAhead(count: 3, blockSize: 64, blocks: 2) { index in
            if index == 2 { throw SystemError("cannot open", path: "item-2", errno: ENOENT) }
            return StepSource(content(index, length: 500), step: 50, failAfter: index == 1 ? 200 : nil)
        }
        try ahead.start()
        defer { ahead.finish() }
        #expect(try drain(ahead.stream(0), readSize: 100) == content(0, length: 500))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 10)
        let error = #expect(throws: SystemError.self) {
            while true {
                let n = try ahead.stream(1).read(into: &buffer, offset: 0, count: 10)
                if n == 0 { break }
                received += buffer[0..<n]
            }
        }
        #expect(error?.operation == "simulated read failure")
        // Only whole blocks filled before the failure were delivered, and they were right.
        #expect(received == Array(content(1, length: 500).prefix(received.count)))
        #expect(received.count <= 200)
        // The worker stopped there: a later stream reports that instead of hanging.
        #expect(throws: SystemError.self) { _ = try drain(ahead.stream(2), readSize: 10) }
    }

    @Test("finish() stops a worker that is waiting for the reader, and frees the blocks")
    func finishStopsABlockedWorker() throws {
        var opened = 0
        let ahead = ReadAhead(count: 1000, blockSize: 16, blocks: 2) { index in
            opened += 1
            return StepSource(content(index, length: 64), step: 64)
        }
        try ahead.start()
        #expect(try drain(ahead.stream(0), readSize: 8) == content(0, length: 64))
        ahead.finish()   // would hang if the worker could not be woken while it waits for a block
        #expect(opened < 1000)
        #expect(throws: SystemError.self) { _ = try drain(ahead.stream(1), readSize: 8) }
    }

    @Test("short streams are opened at most streamsAhead past the one being read, whatever room the blocks have", arguments: [1, 2, 5])
    func streamsAheadBound(limit: Int) throws {
        final class Count: @unchecked Sendable {
            private let lock = NSLock()
            private var n = 0
            func add() { lock.lock(); n += 1; lock.unlock() }
            var value: Int { lock.lock(); defer { lock.unlock() }; return n }
        }
        let opened = Count()
        let ahead = ReadAhead(count: 40, blockSize: 64, blocks: 16, streamsAhead: limit) { index in
            opened.add()
            return StepSource(content(index, length: 10), step: 10)
        }
        try ahead.start()
        defer { ahead.finish() }
        var reachedTheBound = false
        for index in 0..<40 {
            usleep(2_000)   // room for the worker to run ahead as far as it may
            // `index` streams were read to their end: the worker may have opened up to `limit` more.
            let seen = opened.value
            #expect(seen <= min(40, index + limit), "stream \(index): \(seen) opened")
            if seen == min(40, index + limit) { reachedTheBound = true }
            #expect(try drain(ahead.stream(index), readSize: 64) == content(index, length: 10), "stream \(index)")
        }
        // Sixteen free blocks would let it open sixteen ahead; it went as far as allowed.
        #expect(reachedTheBound)
    }

    @Test("reading without starting the worker is an error, not a hang")
    func notStarted() {
        let ahead = ReadAhead(count: 1) { _ in StepSource([1, 2, 3], step: 3) }
        #expect(throws: SystemError.self) { _ = try drain(ahead.stream(0), readSize: 8) }
    }

    @Test("lanes: streams produced by several workers in turn still arrive whole and in order")
    func lanesKeepOrder() throws {
        let lengths = (0..<501).map { ($0 * 37) % 3000 }
        let lanes = ReadAheadLanes(count: lengths.count, lanes: 3) { lane in
            { index in
                // Each lane must get exactly its own streams: lane, lane + 3, lane + 6, …
                guard index % 3 == lane else { throw SystemError("stream \(index) opened by lane \(lane)", errno: EINVAL) }
                return StepSource(content(index, length: lengths[index]), step: 700)
            }
        }
        try lanes.start()
        defer { lanes.finish() }
        for (index, length) in lengths.enumerated() {
            #expect(try drain(lanes.stream(index), readSize: 1000) == content(index, length: length), "stream \(index)")
        }
    }

    @Test("lanes: a failure in one lane reaches the reader at that stream, after every earlier one")
    func laneFailure() throws {
        let lanes = ReadAheadLanes(count: 10, lanes: 2) { _ in
            { index in
                if index == 5 { throw SystemError("cannot open", path: "item-5", errno: ENOENT) }
                return StepSource(content(index, length: 100), step: 100)
            }
        }
        try lanes.start()
        defer { lanes.finish() }
        for index in 0..<5 {
            #expect(try drain(lanes.stream(index), readSize: 64) == content(index, length: 100))
        }
        let error = #expect(throws: SystemError.self) { _ = try drain(lanes.stream(5), readSize: 64) }
        #expect(error?.path == "item-5")
    }
}
