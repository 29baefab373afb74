import N11Crypto

// Byte helpers shared by the test targets.

/// `count` bytes from the system's random number generator.
public func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    var out = [UInt8](repeating: 0, count: count)
    var i = 0
    while i < count {
        var word = generator.next()
        for _ in 0..<8 where i < count {
            out[i] = UInt8(truncatingIfNeeded: word)
            word >>= 8
            i += 1
        }
    }
    return out
}

/// Whether `needle` occurs anywhere in `haystack` (an empty needle always does).
public func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return needle.isEmpty }
    return haystack.withUnsafeBufferPointer { h in
        let first = needle[0]
        for i in 0...(h.count - needle.count) where h[i] == first {
            if h[i..<(i + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }
}

/// A password or PIN as the library takes it.
public func secret(_ text: String) throws -> SecureBytes {
    try SecureBytes(copying: Array(text.utf8))
}

/// Collects what a vault or archive read stages (tests only: a real sink keeps it out of sight).
public final class CollectingSink: UnverifiedPlaintextSink {
    public private(set) var bytes: [UInt8] = []
    public init() {}
    public func stage(_ chunk: ArraySlice<UInt8>) throws { bytes.append(contentsOf: chunk) }
}
