import Synchronization

/// Large streaming buffers kept for the next item instead of freed.
///
/// `main.swift` fixes glibc's mmap threshold at 128 KiB (`Heap.fixLargeAllocationThreshold`,
/// for a long run's RSS), so each buffer of that size or more is a mapping of its own: mapped
/// when made, faulted in a page at a time, unmapped when freed. A photo's item took three
/// buffers of 1 MiB in a `create` (the decryptor's input, the checker's scratch, the tee) and
/// two in a restore (the sealer's input and output): the mixed set's `create --secure` made
/// 186,000 page faults and spent 15% of its CPU time in faults and `munmap`; kept, 12,000
/// (BENCHMARKS.md, issue 29).
///
/// Only full-size buffers are kept (`SingleTagStream.bufferSize` and the few bytes more of
/// a nonce and tag): every item of 1 MiB or more uses the same three sizes, so one is nearly
/// always there to take. A smaller item's buffer is of its own size and allocated and freed
/// as before; kept, such buffers would fill the pool with sizes no later item asks for. At
/// most `kept` buffers wait here (a few MiB), whatever the number of items or threads.
public final class StreamBuffers: Sendable {
    /// The one every stream uses; tests make their own.
    public static let shared = StreamBuffers()
    /// Buffers of fewer bytes are not kept: a smaller item's buffers are of its own size.
    public static let smallest = SingleTagStream.bufferSize
    public let kept: Int
    private let spare = Mutex<[[UInt8]]>([])

    public init(kept: Int = 8) { self.kept = kept }

    /// A buffer of `count` bytes whose contents are not set (`[UInt8].scratch`): a kept one of
    /// that size if there is one.
    public static func take(count: Int) -> [UInt8] { shared.take(count: count) }

    /// Hands `buffer` back to the shared ones (`give(_:used:)`).
    public static func give(_ buffer: inout [UInt8], used: Int) { shared.give(&buffer, used: used) }

    public func take(count: Int) -> [UInt8] {
        if count >= Self.smallest,
           let buffer = spare.withLock({ spare -> [UInt8]? in
               guard let index = spare.lastIndex(where: { $0.count == count }) else { return nil }
               return spare.remove(at: index)
           }) {
            return buffer
        }
        return .scratch(count: count)
    }

    /// Hands `buffer` back, after wiping its first `used` bytes (the part that may have held
    /// plaintext), and leaves `buffer` empty. A buffer below `smallest`, or one beyond the
    /// `kept` already waiting, is freed.
    public func give(_ buffer: inout [UInt8], used: Int) {
        buffer.wipe(prefix: used)
        var returned: [UInt8] = []
        swap(&returned, &buffer)
        guard returned.count >= Self.smallest else { return }
        spare.withLock { spare in
            if spare.count < kept { spare.append(returned) }
        }
    }

    /// How many buffers wait to be taken again.
    public var waiting: Int { spare.withLock { $0.count } }
}
