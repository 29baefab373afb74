import Foundation
import Glibc
import Testing
@testable import N11Crypto
import N11System

@Suite("SecureBytes and SecureRandom")
struct SecureBytesTests {
    @Test("new buffers are zero-filled; sizes are bounded")
    func allocation() throws {
        let zeros = try SecureBytes(count: 64)
        #expect(zeros.count == 64)
        #expect(zeros.bytes == [UInt8](repeating: 0, count: 64))
        #expect(try SecureBytes(count: 0).count == 0)
        for bad in [-1, (1 << 30) + 1] {
            let error = #expect(throws: CryptoError.self, "size \(bad)") { _ = try SecureBytes(count: bad) }
            #expect(isInvalidParameter(error))
        }
        let copied = try SecureBytes(copying: [1, 2, 3][1...])
        #expect(copied.bytes == [2, 3])
    }

    @Test("random buffers differ from each other and from zero")
    func randomness() throws {
        let a = try SecureBytes(randomCount: 32), b = try SecureBytes(randomCount: 32)
        #expect(a.count == 32)
        #expect(!a.constantTimeEquals(b))
        #expect(a.bytes != [UInt8](repeating: 0, count: 32))
        let x = SecureRandom.bytes(32), y = SecureRandom.bytes(32)
        #expect(x.count == 32 && x != y)
        #expect(SecureRandom.bytes(0).isEmpty)
        // 1000 draws below 7 all land in range and cover it.
        let draws = (0..<1000).map { _ in SecureRandom.uniform(below: 7) }
        #expect(draws.allSatisfy { $0 < 7 })
        #expect(Set(draws).count == 7)
    }

    @Test("small random values come from a pool filled 4 KiB at a time: never the same bytes twice, across refills and threads")
    func pooledRandom() throws {
        let pool = RandomPool()
        // 12-byte nonces across several refills: all distinct, none zero, one fill per 341.
        let nonces = (0..<3000).map { _ in pool.take(12) }
        #expect(Set(nonces).count == nonces.count)
        #expect(!nonces.contains([UInt8](repeating: 0, count: 12)))
        #expect(pool.fills == (3000 + 340) / 341, "one getrandom per 4 KiB, not per nonce: \(pool.fills)")
        // A draw that does not fit what is left refills first: no short or reused value.
        let odd = (0..<500).map { i in pool.take([1, 16, 63, 64][i % 4]) }
        #expect(odd.enumerated().allSatisfy { $0.element.count == [1, 16, 63, 64][$0.offset % 4] })
        #expect(Set(odd.filter { $0.count == 64 }).count == 125)
        // Threads drawing at once never get the same bytes.
        let threads = 4, each = 2000
        let lock = NSLock()
        nonisolated(unsafe) var drawn: [[UInt8]] = []
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            var mine: [[UInt8]] = []
            for _ in 0..<each { mine.append(pool.take(16)) }
            lock.withLock { drawn += mine }
        }
        #expect(Set(drawn).count == threads * each)
        // SecureRandom.bytes serves small counts from the shared pool (other tests draw from
        // it at the same time, so its fill count says nothing here), larger ones directly.
        let shared = (0..<400).map { _ in SecureRandom.bytes(12) }
        #expect(Set(shared).count == shared.count)
        #expect(SecureRandom.bytes(1000).count == 1000)
    }

    @Test("constantTimeEquals")
    func equality() throws {
        let bytes = patternBytes(40)
        let a = try SecureBytes(copying: bytes)
        #expect(a.constantTimeEquals(try SecureBytes(copying: bytes)))
        #expect(a.constantTimeEquals(a))
        for index in [0, 19, 39] {
            var other = bytes
            other[index] ^= 0x01
            #expect(!a.constantTimeEquals(try SecureBytes(copying: other)), "differs at \(index)")
        }
        #expect(!a.constantTimeEquals(try SecureBytes(copying: bytes.dropLast())))
        #expect(!a.constantTimeEquals(try SecureBytes(copying: bytes + [0])))
        #expect(try SecureBytes(count: 0).constantTimeEquals(try SecureBytes(count: 0)))
    }

    @Test("slice and concatenated copy the right bytes")
    func sliceAndConcatenate() throws {
        let bytes = patternBytes(50)
        let a = try SecureBytes(copying: bytes)
        #expect(try a.slice(0..<50).bytes == bytes)
        #expect(try a.slice(10..<20).bytes == Array(bytes[10..<20]))
        #expect(try a.slice(50..<50).count == 0)
        let b = try SecureBytes(copying: [9, 8, 7])
        #expect(try a.concatenated(with: b).bytes == bytes + [9, 8, 7])
        #expect(try b.concatenated(with: try SecureBytes(count: 0)).bytes == [9, 8, 7])
        // The results are copies: changing one leaves the source alone.
        let s = try a.slice(0..<4)
        s.withUnsafeMutableBytes { $0[0] ^= 0xFF }
        #expect(a.bytes == bytes)
    }
}

/// `readSecret` from a pipe (how a password arrives on stdin) and from a file.
@Suite("SecureBytes.readSecret")
struct ReadSecretTests {
    /// A pipe holding `bytes`, write end closed; the read end as a FileDescriptor.
    private func pipe(holding bytes: [UInt8]) throws -> FileDescriptor {
        var fds: [Int32] = [-1, -1]
        try #require(Glibc.pipe(&fds) == 0)
        let written = bytes.withUnsafeBytes { Glibc.write(fds[1], $0.baseAddress, $0.count) }
        #expect(written == bytes.count)
        Glibc.close(fds[1])
        return FileDescriptor(adopting: fds[0], path: "<pipe>")
    }

    private func read(_ text: String, maxLength: Int = 4096, stopAtNewline: Bool = true) throws -> String {
        let secret = try SecureBytes.readSecret(from: try pipe(holding: Array(text.utf8)),
                                                maxLength: maxLength, stopAtNewline: stopAtNewline)
        return String(decoding: secret.bytes, as: UTF8.self)
    }

    @Test("a trailing newline or CRLF is not part of the secret")
    func lineEndings() throws {
        #expect(try read("hunter2\n") == "hunter2")
        #expect(try read("hunter2\r\n") == "hunter2")
        #expect(try read("hunter2") == "hunter2")
        #expect(try read("") == "")
        #expect(try read("\n") == "")
        #expect(try read("  spaced out  \n") == "  spaced out  ")
        #expect(try read("pässwörd\n") == "pässwörd")
    }

    @Test("stopAtNewline reads one line and leaves the rest unread")
    func stopsAtNewline() throws {
        let fd = try pipe(holding: Array("first\nsecond\n".utf8))
        #expect(try SecureBytes.readSecret(from: fd).bytes == Array("first".utf8))
        // A PIN and its confirmation can come from the same stdin.
        #expect(try SecureBytes.readSecret(from: fd).bytes == Array("second".utf8))
        #expect(try SecureBytes.readSecret(from: fd).bytes == [])
    }

    @Test("whole-file mode keeps inner newlines and drops one final line end")
    func wholeFile() throws {
        #expect(try read("line one\nline two\n", stopAtNewline: false) == "line one\nline two")
        #expect(try read("line one\r\nline two\r\n", stopAtNewline: false) == "line one\r\nline two")
        #expect(try read("no newline", stopAtNewline: false) == "no newline")
    }

    @Test("a secret longer than maxLength is refused")
    func tooLong() throws {
        for (text, stop) in [("123456789\n", true), ("123456789", true), ("123456789", false),
                             ("1234\n56789", false), ("12345678\r\nX", false), ("12345678\rX\n", true)] {
            let error = #expect(throws: CryptoError.self, "\(text.debugDescription), stopAtNewline \(stop)") {
                _ = try read(text, maxLength: 8, stopAtNewline: stop)
            }
            #expect(isInvalidParameter(error))
        }
        // Exactly maxLength bytes is fine.
        #expect(try read("12345678\n", maxLength: 8) == "12345678")
        #expect(try read("12345678", maxLength: 8) == "12345678")
        #expect(try read("12345678", maxLength: 8, stopAtNewline: false) == "12345678")
    }

    /// The line end is not part of the secret, so it must not count against maxLength either.
    @Test("a secret of exactly maxLength bytes followed by its line end is accepted")
    func maxLengthWithLineEnd() throws {
        #expect(try read("12345678\r\n", maxLength: 8) == "12345678")
        #expect(try read("12345678\n", maxLength: 8, stopAtNewline: false) == "12345678")
    }

    @Test("reads a secret from a file")
    func fromFile() throws {
        var template = Array("/tmp/n11-readsecret-XXXXXX".utf8CString)
        let directory = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
            .map { String(cString: $0) })
        let path = directory + "/pin"
        defer { unlink(path); rmdir(directory) }

        let writer = try FileDescriptor.createExclusive(path, mode: 0o600)
        try writer.write(Array("4711\r\n".utf8))
        try writer.close()

        let reader = try FileDescriptor.openForReading(path)
        #expect(try SecureBytes.readSecret(from: reader).bytes == Array("4711".utf8))
        let whole = try FileDescriptor.openForReading(path)
        #expect(try SecureBytes.readSecret(from: whole, stopAtNewline: false).bytes == Array("4711".utf8))
    }

    @Test("a read error is reported as an I/O error")
    func readError() throws {
        // A write-only descriptor cannot be read: read(2) fails with EBADF.
        var fds: [Int32] = [-1, -1]
        try #require(Glibc.pipe(&fds) == 0)
        Glibc.close(fds[0])
        let writeEnd = FileDescriptor(adopting: fds[1], path: "<write end>")
        let error = #expect(throws: CryptoError.self) { _ = try SecureBytes.readSecret(from: writeEnd) }
        guard case .io? = error else {
            Issue.record("expected CryptoError.io, got \(String(describing: error))")
            return
        }
    }
}
