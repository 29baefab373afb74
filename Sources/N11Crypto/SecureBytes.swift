internal import CSodium
import N11System

/// Secret bytes (keys, passwords, PINs) in memory from `sodium_malloc`: guarded by
/// no-access pages, locked so it is never swapped, and wiped by `sodium_free` when the
/// object goes away (DESIGN.md §3.4). The bytes are reachable only inside closures, so no
/// copy leaks into an Array, Data or String by accident.
public final class SecureBytes: @unchecked Sendable {
    public let count: Int
    private let pointer: UnsafeMutableRawPointer

    /// Zero-filled locked memory of `count` bytes.
    public init(count: Int) throws(CryptoError) {
        Sodium.ensureInitialized()
        guard count >= 0, count <= 1 << 30 else { throw .invalidParameter("secure buffer size \(count)") }
        // sodium_malloc(0) is legal but returns a pointer we cannot write; keep one byte.
        guard let p = sodium_malloc(max(count, 1)) else { throw .secureMemoryUnavailable(bytes: count) }
        pointer = p
        self.count = count
        sodium_memzero(p, max(count, 1))
    }

    /// Fresh random bytes from the system CSPRNG, written straight into locked memory.
    public convenience init(randomCount count: Int) throws(CryptoError) {
        try self.init(count: count)
        randombytes_buf(pointer, count)
    }

    /// Copies bytes that are already in ordinary memory (test vectors, decrypted key records).
    /// Callers holding a real secret in an array should wipe it right after.
    public convenience init(copying bytes: some Collection<UInt8>) throws(CryptoError) {
        try self.init(count: bytes.count)
        var i = 0
        for b in bytes { pointer.storeBytes(of: b, toByteOffset: i, as: UInt8.self); i += 1 }
    }

    deinit { sodium_free(pointer) }

    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    public func withUnsafeMutableBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeMutableRawBufferPointer(start: pointer, count: count))
    }

    /// Constant-time equality: the time taken does not depend on where the bytes differ.
    public func constantTimeEquals(_ other: SecureBytes) -> Bool {
        guard count == other.count else { return false }
        return sodium_memcmp(pointer, other.pointer, count) == 0
    }

    /// A new secure buffer holding `range` of this one.
    public func slice(_ range: Range<Int>) throws(CryptoError) -> SecureBytes {
        precondition(range.lowerBound >= 0 && range.upperBound <= count)
        let out = try SecureBytes(count: range.count)
        out.pointer.copyMemory(from: pointer + range.lowerBound, byteCount: range.count)
        return out
    }

    /// A new secure buffer holding this one's bytes followed by `other`'s.
    public func concatenated(with other: SecureBytes) throws(CryptoError) -> SecureBytes {
        let out = try SecureBytes(count: count + other.count)
        out.pointer.copyMemory(from: pointer, byteCount: count)
        (out.pointer + count).copyMemory(from: other.pointer, byteCount: other.count)
        return out
    }

    /// Reads a secret (a password or PIN) from `descriptor` into locked memory, up to
    /// `maxLength` bytes or the first newline, without the bytes ever passing through a
    /// String or Array. The line end ("\n" or "\r\n") is not part of the secret.
    public static func readSecret(from descriptor: FileDescriptor, maxLength: Int = 4096,
                                  stopAtNewline: Bool = true) throws(CryptoError) -> SecureBytes {
        let scratch = try SecureBytes(count: maxLength + 3)
        var length = 0
        var byte: UInt8 = 0
        while length < maxLength + 3 {
            let n = Glibc.read(descriptor.rawValue, &byte, 1)
            if n < 0 {
                if Glibc.errno == EINTR { continue }
                throw .io("cannot read the secret from \(descriptor.path): \(String(cString: strerror(Glibc.errno)))")
            }
            if n == 0 { break }
            if stopAtNewline && byte == 0x0A { break }
            scratch.pointer.storeBytes(of: byte, toByteOffset: length, as: UInt8.self)
            length += 1
        }
        byte = 0
        let capped = length == maxLength + 3
        // The line end is not part of the secret: in whole-file mode one final "\n", then (in
        // both modes) one "\r" before it, for files written on Windows. Exactly one each, as
        // FORMAT.md §3 states, so another reader derives the same key from the same file.
        func last() -> UInt8 { scratch.pointer.load(fromByteOffset: length - 1, as: UInt8.self) }
        if !stopAtNewline && length > 0 && last() == 0x0A { length -= 1 }
        if length > 0 && last() == 0x0D { length -= 1 }
        guard !capped, length <= maxLength else { throw .invalidParameter("secret in \(descriptor.path) is longer than \(maxLength) bytes") }
        return try scratch.slice(0..<length)
    }

    /// Reads a whole small file (a key store) straight into locked memory, byte for byte.
    public static func readContents(of descriptor: FileDescriptor, limit: Int) throws -> SecureBytes {
        let scratch = try SecureBytes(count: limit + 1)
        var length = 0
        while length <= limit {
            let n = Glibc.read(descriptor.rawValue, scratch.pointer + length, limit + 1 - length)
            if n < 0 {
                if Glibc.errno == EINTR { continue }
                throw SystemError("cannot read", path: descriptor.path)
            }
            if n == 0 { break }
            length += n
        }
        guard length <= limit else { throw CryptoError.invalidParameter("'\(descriptor.path)' is larger than \(limit) bytes") }
        return try scratch.slice(0..<length)
    }
}

import Glibc
