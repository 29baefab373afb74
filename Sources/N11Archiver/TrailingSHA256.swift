import Foundation
import N11Crypto
import N11System

/// SHA-256 of an archive while libzip is still writing it: a thread reads back from the page
/// cache what the writer has declared final (`FinalPrefixObserver`) and hashes it, on the core
/// the pipeline leaves free. Hashing the complete file afterwards was a serial pass of its own,
/// 0.35 s of a 1.5 s create on the mixed set (BENCHMARKS.md, issue 29). If the writer voids
/// what it declared, or a read fails, `finish` says so and the caller reads the file back.
/// Its thread holds it until `finish` or `cancel` is called: one of them must be.
final class TrailingSHA256: FinalPrefixObserver, @unchecked Sendable {
    private let fd: FileDescriptor
    private let condition = NSCondition()
    /// Guarded by `condition`: how far the file is final and how far it is hashed; `stopped`
    /// once `finish` has what it waits for, `useless` once no digest can come of it (voided, a
    /// read failed, or cancelled).
    private var final: Int64 = 0
    private var hashed: Int64 = 0
    private var stopped = false
    private var useless = false
    private var exited = false
    private var digest: SHA256Digest?

    init(_ fd: FileDescriptor) {
        self.fd = fd
        digest = try? SHA256Digest()
        if digest == nil { useless = true }
        let thread = Thread { [self] in run() }
        thread.start()
    }

    func prefixIsFinal(upTo end: Int64) {
        condition.lock()
        final = max(final, end)
        condition.signal()
        condition.unlock()
    }

    func finalPrefixWasRewritten() {
        condition.lock()
        useless = true
        condition.broadcast()
        condition.unlock()
    }

    /// The file's SHA-256 (hex) once its first `size` bytes are hashed; nil if they cannot be
    /// (voided, a read failed, or fewer than `size` bytes were declared final).
    func finish(size: Int64) -> String? {
        condition.lock()
        while !exited && !useless && hashed < min(size, final) { condition.wait() }
        let complete = !useless && hashed == size && final == size
        stopped = true
        condition.broadcast()
        while !exited { condition.wait() }
        let result = complete ? digest : nil
        condition.unlock()
        return try? result?.finish().hex
    }

    /// Stops the thread without a result (the archive was not completed). Idempotent.
    func cancel() {
        condition.lock()
        useless = true
        condition.broadcast()
        while !exited { condition.wait() }
        condition.unlock()
    }

    private func run() {
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        condition.lock()
        defer {
            exited = true
            condition.broadcast()
            condition.unlock()
        }
        while true {
            while !stopped && !useless && hashed == final { condition.wait() }
            if useless || hashed == final { return }
            let (from, upTo) = (hashed, final)
            condition.unlock()
            var position = from
            var failed = false
            while position < upTo {
                let count = Int(min(Int64(buffer.count), upTo - position))
                guard let n = try? fd.read(into: &buffer, count: count, at: position), n > 0 else { failed = true; break }
                digest?.update(buffer[0..<n])
                position += Int64(n)
            }
            condition.lock()
            hashed = position
            if failed { useless = true }
            condition.broadcast()
        }
    }
}
