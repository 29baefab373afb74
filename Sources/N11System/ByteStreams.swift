/// Where streamed bytes come from and go to. Files, ZIP entries and pipes conform, so the
/// crypto layer can stream without knowing about paths or containers.
public protocol ByteSource: AnyObject {
    /// Reads up to `count` bytes into `buffer[offset...]`; returns 0 only at the end.
    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int
}

public protocol ByteSink: AnyObject {
    func write(_ bytes: ArraySlice<UInt8>) throws
}

extension ByteSource {
    /// Fills `buffer[offset..<offset+count]` unless the source ends first; returns bytes read.
    public func readFully(into buffer: inout [UInt8], offset: Int = 0, count: Int) throws -> Int {
        var filled = 0
        while filled < count {
            let n = try read(into: &buffer, offset: offset + filled, count: count - filled)
            if n == 0 { break }
            filled += n
        }
        return filled
    }
}

extension FileDescriptor: ByteSource, ByteSink {}

/// A byte source over memory (small notes read whole, tests).
public final class MemorySource: ByteSource {
    private let bytes: [UInt8]
    private var position = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        let n = min(count, bytes.count - position)
        buffer.replaceSubrange(offset..<(offset + n), with: bytes[position..<(position + n)])
        position += n
        return n
    }
}

/// Several sources read one after another as one, each opened only when the one before it
/// ended (a version 3 pack: its items' payloads back to back).
public final class ConcatenatedSource: ByteSource {
    private var parts: IndexingIterator<[() throws -> ByteSource]>
    private var current: ByteSource?

    public init(_ parts: [() throws -> ByteSource]) { self.parts = parts.makeIterator() }

    public func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        while true {
            let source: ByteSource
            if let current { source = current } else {
                guard let open = parts.next() else { return 0 }
                source = try open()
                current = source
            }
            let n = try source.read(into: &buffer, offset: offset, count: count)
            if n > 0 || count == 0 { return n }
            current = nil
        }
    }
}
