import Glibc
import N11System
import N11Vault
import Synchronization

/// How far a create, verify, restore or export has got, for a progress bar. The pipeline
/// announces its totals before the first byte (items and plaintext bytes it will process),
/// then counts bytes as each chunk passes through a `ProgressCountingSource`, so one large
/// item moves the bar too. `report` is called at most once per `interval` seconds (and once
/// more at the end), on the pipeline's thread.
///
/// Cheap by design, because it sits in the hot loop: per chunk one atomic add and one read
/// of the monotonic clock (vDSO, no system call); no lock. The counters are atomics so that
/// a pipeline reading items on more than one thread can share one observer.
public final class ArchiveProgress: Sendable, VaultChangeProgress {
    public struct Snapshot: Sendable, Equatable {
        public let totalItems: Int
        public let totalBytes: Int64
        public let items: Int
        public let bytes: Int64
        /// Seconds since `begin`.
        public let elapsed: Double
        /// True for the last report of a run.
        public let finished: Bool
        /// Bytes already done at `begin` (an upload that followed the archive as it was
        /// written): counted in `bytes`, but not done in `elapsed`.
        public let bytesAtBegin: Int64

        public init(totalItems: Int, totalBytes: Int64, items: Int, bytes: Int64, elapsed: Double, finished: Bool,
                    bytesAtBegin: Int64 = 0) {
            self.totalItems = totalItems; self.totalBytes = totalBytes; self.items = items
            self.bytes = bytes; self.elapsed = elapsed; self.finished = finished; self.bytesAtBegin = bytesAtBegin
        }

        /// Bytes a second since `begin`, of the bytes done since then (0 before any time passed).
        public var rate: Double { elapsed > 0 ? Double(max(0, bytes - bytesAtBegin)) / elapsed : 0 }
    }

    private let intervalNanoseconds: UInt64
    private let report: @Sendable (Snapshot) -> Void
    private let totalItems = Atomic<Int>(0)
    private let totalBytes = Atomic<Int64>(0)
    private let items = Atomic<Int>(0)
    private let bytes = Atomic<Int64>(0)
    private let bytesAtBegin = Atomic<Int64>(0)
    private let started = Atomic<UInt64>(0)
    private let lastReport = Atomic<UInt64>(0)

    /// `interval` 0 reports every chunk (tests); the CLI throttles to its redraw rate.
    public init(interval: Double, report: @escaping @Sendable (Snapshot) -> Void) {
        intervalNanoseconds = UInt64(max(0, interval) * 1e9)
        self.report = report
    }

    /// The totals, known before any item is read; reports once, so a bar appears at 0.
    public func begin(items: Int, bytes: Int64) { begin(items: items, bytes: bytes, alreadyDone: 0) }

    /// As `begin(items:bytes:)`, with `alreadyDone` bytes done before the bar (an upload that
    /// followed the archive as it was written): the rate and the ETA count only what is done
    /// from here.
    public func begin(items: Int, bytes: Int64, alreadyDone: Int64) {
        totalItems.store(items, ordering: .relaxed)
        totalBytes.store(bytes, ordering: .relaxed)
        bytesAtBegin.store(alreadyDone, ordering: .relaxed)
        self.bytes.add(alreadyDone, ordering: .relaxed)
        let now = Self.now()
        started.store(now, ordering: .relaxed)
        lastReport.store(now, ordering: .relaxed)
        report(snapshot(at: now, finished: false))
    }

    /// Bytes of plaintext done (called per chunk).
    public func add(bytes count: Int64) {
        bytes.add(count, ordering: .relaxed)
        reportIfDue()
    }

    public func itemDone() {
        items.add(1, ordering: .relaxed)
        reportIfDue()
    }

    /// The last report of a successful run.
    public func finish() {
        report(snapshot(at: Self.now(), finished: true))
    }

    /// Reports where a run that failed got to, at once: the throttled reports may be up to
    /// `interval` behind (a small export onto a full disk showed "0/300 items" when its
    /// error came, although every item had been checked). Nothing if the run never began.
    public func reportWhereItStopped() {
        guard started.load(ordering: .relaxed) != 0 else { return }
        report(snapshot(at: Self.now(), finished: false))
    }

    /// Wraps an item's source: counts what is read from it, at most `size` bytes (a sealed
    /// stream carries a little more than its plaintext), until `complete()`.
    func counting(_ source: ByteSource, size: Int64) -> ProgressCountingSource {
        ProgressCountingSource(source, size: size, progress: self)
    }

    private func reportIfDue() {
        let now = Self.now()
        let last = lastReport.load(ordering: .relaxed)
        guard now &- last >= intervalNanoseconds else { return }
        // Only the thread that moves the mark reports, so two threads never draw at once.
        guard lastReport.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged else { return }
        report(snapshot(at: now, finished: false))
    }

    private func snapshot(at now: UInt64, finished: Bool) -> Snapshot {
        Snapshot(totalItems: totalItems.load(ordering: .relaxed), totalBytes: totalBytes.load(ordering: .relaxed),
                 items: items.load(ordering: .relaxed), bytes: bytes.load(ordering: .relaxed),
                 elapsed: Double(now &- started.load(ordering: .relaxed)) / 1e9, finished: finished,
                 bytesAtBegin: bytesAtBegin.load(ordering: .relaxed))
    }

    private static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}

/// Counts the bytes read through it into an `ArchiveProgress`, capped at the item's size;
/// `complete()` credits the rest of the item and counts it done.
final class ProgressCountingSource: ByteSource {
    private let source: ByteSource
    private let size: Int64
    private let progress: ArchiveProgress
    private var counted: Int64 = 0
    private var done = false

    init(_ source: ByteSource, size: Int64, progress: ArchiveProgress) {
        self.source = source
        self.size = size
        self.progress = progress
    }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        let n = try source.read(into: &buffer, offset: offset, count: count)
        // The end of the item (libzip reads each entry's source to its end).
        if n == 0 && count > 0 { complete(); return 0 }
        let credit = min(Int64(n), size - counted)
        if credit > 0 {
            counted += credit
            progress.add(bytes: credit)
        }
        return n
    }

    /// Idempotent: the end of the stream and the pipeline may both call it.
    func complete() {
        guard !done else { return }
        done = true
        if counted < size { progress.add(bytes: size - counted) }
        counted = size
        progress.itemDone()
    }
}

extension Optional where Wrapped == ArchiveProgress {
    /// The source itself without an observer (no wrapper, no cost), else a counting wrapper.
    func counting(_ source: ByteSource, size: Int64) -> ByteSource {
        guard let progress = self else { return source }
        return progress.counting(source, size: size)
    }

    /// Credits an item done (only meaningful for a source from `counting`).
    func complete(_ source: ByteSource) {
        (source as? ProgressCountingSource)?.complete()
    }
}
