import Foundation
import N11Crypto
import N11System

// Shared helpers for the crypto tests: fixture loading, hex, and in-memory byte streams.

/// Fixtures/vectors/ of this package, found from this file's path
/// (Tests/N11CryptoTests/TestSupport.swift → ../../Fixtures/vectors).
enum Fixtures {
    static let vectorsDirectory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()   // N11CryptoTests
        .deletingLastPathComponent()   // Tests
        .deletingLastPathComponent()   // package root
        .appendingPathComponent("Fixtures/vectors", isDirectory: true)

    static func data(_ name: String) throws -> Data {
        try Data(contentsOf: vectorsDirectory.appendingPathComponent(name))
    }

    static func decode<T: Decodable>(_ type: T.Type, from name: String) throws -> T {
        try JSONDecoder().decode(T.self, from: data(name))
    }
}

struct HexError: Error, CustomStringConvertible {
    let text: String
    var description: String { "not a hex string: \(text.prefix(40))" }
}

/// Decodes lower- or upper-case hex; throws on odd length or a non-hex character.
func hex(_ text: String) throws -> [UInt8] {
    let digits = Array(text.utf8)
    guard digits.count % 2 == 0 else { throw HexError(text: text) }
    func nibble(_ c: UInt8) throws -> UInt8 {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: throw HexError(text: text)
        }
    }
    var out = [UInt8]()
    out.reserveCapacity(digits.count / 2)
    var i = 0
    while i < digits.count {
        out.append(try nibble(digits[i]) << 4 | nibble(digits[i + 1]))
        i += 2
    }
    return out
}

func hexString(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
}

extension SecureBytes {
    /// The bytes copied out, for comparing in tests only.
    var bytes: [UInt8] { withUnsafeBytes { Array($0) } }
}

/// Pseudo-random plaintext that is cheap and deterministic (so failures reproduce).
func patternBytes(_ count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
    var state = seed
    var out = [UInt8](repeating: 0, count: count)
    for i in 0..<count {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        out[i] = UInt8(truncatingIfNeeded: state >> 56)
    }
    return out
}

/// A ByteSource over an array. `readSizes`, if given, caps successive reads (cycling), so
/// callers that assume a read fills the buffer are caught.
final class MemorySource: ByteSource {
    private let bytes: [UInt8]
    private var position = 0
    private let readSizes: [Int]
    private var readIndex = 0
    private(set) var readCalls = 0

    init(_ bytes: [UInt8], readSizes: [Int] = []) {
        precondition(readSizes.allSatisfy { $0 > 0 })
        self.bytes = bytes
        self.readSizes = readSizes
    }

    var remaining: Int { bytes.count - position }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        precondition(offset >= 0 && count >= 0 && offset + count <= buffer.count)
        readCalls += 1
        var n = min(count, bytes.count - position)
        if !readSizes.isEmpty {
            n = min(n, readSizes[readIndex % readSizes.count])
            readIndex += 1
        }
        if n > 0 {
            buffer.replaceSubrange(offset..<(offset + n), with: bytes[position..<(position + n)])
            position += n
        }
        return n
    }
}

/// A ByteSink that keeps everything written, and counts the writes.
final class MemorySink: ByteSink {
    private(set) var bytes: [UInt8] = []
    private(set) var writeCalls = 0

    func write(_ bytes: ArraySlice<UInt8>) throws {
        writeCalls += 1
        self.bytes.append(contentsOf: bytes)
    }
}

/// An UnverifiedPlaintextSink that keeps what it is given (the test plays the role of the
/// caller that discards it on failure).
final class CollectingPlaintextSink: UnverifiedPlaintextSink {
    private(set) var bytes: [UInt8] = []
    func stage(_ bytes: ArraySlice<UInt8>) throws { self.bytes.append(contentsOf: bytes) }
}

func key(_ byte: UInt8 = 0x42) throws -> SecureBytes {
    try SecureBytes(copying: [UInt8](repeating: byte, count: AEADAlgorithm.keyLength))
}

/// True if `error` is `CryptoError.invalidParameter` with any message.
func isInvalidParameter(_ error: (any Error)?) -> Bool {
    if case .invalidParameter? = error as? CryptoError { return true }
    return false
}

/// Wycheproof AEAD files (aead_test_schema.json). All fields of a test are hex.
struct WycheproofAEADFile: Decodable {
    let algorithm: String
    let numberOfTests: Int
    let testGroups: [Group]

    struct Group: Decodable {
        let keySize: Int
        let ivSize: Int
        let tagSize: Int
        let tests: [Test]
    }

    struct Test: Decodable {
        let tcId: Int
        let comment: String
        let flags: [String]
        let key, iv, aad, msg, ct, tag: String
        let result: String
    }
}
