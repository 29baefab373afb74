/// Told by the writer of a file how much of it is final: written out, and never to be
/// written again. `create` hashes a new archive while libzip is still writing it
/// (`TrailingSHA256`), instead of reading the whole file back once it is complete.
/// Both calls come on the writing thread.
public protocol FinalPrefixObserver: AnyObject {
    /// Bytes [0, end) are in the file and will not change; `end` only grows.
    func prefixIsFinal(upTo end: Int64)
    /// A write landed in what was declared final: nothing told so far holds, and nothing more
    /// is told. Not expected of libzip; the observer falls back to reading the file back.
    func finalPrefixWasRewritten()
}

/// Tells every one of `observers` the same, in order (the record's hash and a streamed
/// upload follow one archive).
public final class FinalPrefixObservers: FinalPrefixObserver {
    private let observers: [any FinalPrefixObserver]

    public init(_ observers: [any FinalPrefixObserver]) { self.observers = observers }

    public func prefixIsFinal(upTo end: Int64) {
        for observer in observers { observer.prefixIsFinal(upTo: end) }
    }

    public func finalPrefixWasRewritten() {
        for observer in observers { observer.finalPrefixWasRewritten() }
    }
}
