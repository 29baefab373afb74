internal import CLibCrypto
import N11System

/// The crypto layer's one error type. No case carries key, password or plaintext bytes.
public enum CryptoError: Error, CustomStringConvertible, Sendable, Equatable {
    /// A tag did not verify: wrong key or damaged/tampered data.
    case authenticationFailed
    /// A chunked stream ended before its last chunk.
    case truncated
    /// Bytes follow a chunked stream's last chunk.
    case trailingData
    /// A parameter is outside what this code accepts (checked before any allocation).
    case invalidParameter(String)
    /// sodium_malloc could not get locked memory (RLIMIT_MEMLOCK too small, or out of memory).
    case secureMemoryUnavailable(bytes: Int)
    /// Argon2id could not allocate its memory or failed.
    case keyDerivationFailed
    /// Every tag verified, but the plaintext's length or SHA-256 is not the one recorded for it.
    case contentMismatch
    /// A public or private key that is malformed, not P-256, or not on the curve.
    case invalidKey(String)
    /// A library call failed; the operation names which, and for OpenSSL its error (the
    /// first of its queue: code and reason), kept as a value.
    case library(String, openSSL: OpenSSLError? = nil)
    /// Reading from or writing to the stream's source or sink failed.
    case io(String)

    public var description: String {
        switch self {
        case .authenticationFailed: return "authentication failed (wrong key, or the data was damaged or tampered with)"
        case .truncated: return "the encrypted stream is truncated"
        case .trailingData: return "unexpected data after the end of the encrypted stream"
        case .contentMismatch: return "the content does not match its recorded size and SHA-256 digest"
        case .invalidParameter(let what): return "invalid parameter: \(what)"
        case .secureMemoryUnavailable(let bytes): return "cannot allocate \(bytes) bytes of locked memory (check `ulimit -l`)"
        case .keyDerivationFailed: return "Argon2id key derivation failed (not enough memory?)"
        case .invalidKey(let why): return why
        case let .library(op, openSSL):
            return "crypto library call failed: \(op)" + (openSSL.map { " (OpenSSL error \(String($0.code, radix: 16)): \($0.reason))" } ?? "")
        case .io(let what): return what
        }
    }
}

extension CryptoError: CategorizedError {
    public var kind: FailureKind {
        switch self {
        case .authenticationFailed, .truncated, .trailingData: return .damaged
        case .invalidParameter, .invalidKey: return .damaged
        case .io: return .ioFailure
        default: return .other
        }
    }
}

/// The first error on OpenSSL's queue when a call failed.
public struct OpenSSLError: Sendable, Equatable {
    /// `ERR_get_error()`'s packed code (library and reason).
    public let code: UInt
    /// Its text, from `ERR_error_string_n`.
    public let reason: String
}

extension CryptoError {
    /// An OpenSSL call that failed, with the first error on the queue, which is then
    /// cleared (a stale error must not be blamed on the next failure).
    static func openSSL(_ operation: String) -> CryptoError {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return .library(operation) }
        var text = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &text, text.count)
        let reason = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return .library(operation, openSSL: OpenSSLError(code: UInt(code), reason: reason))
    }
}
