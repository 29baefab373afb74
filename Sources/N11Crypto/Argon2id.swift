import Glibc
internal import CSodium

/// Argon2id cost parameters, bounded before anything is allocated (DESIGN.md §3.6): a
/// hostile archive header cannot make us allocate a terabyte or spin for hours.
public struct Argon2Parameters: Sendable, Equatable, CustomStringConvertible {
    public let opsLimit: UInt64
    public let memoryBytes: UInt64

    /// For PINs: quick enough to type a PIN, still costly to brute-force (seed 003).
    public static let interactive = Argon2Parameters(uncheckedOps: 2, memoryBytes: 64 << 20)
    /// For archive passwords: about a second on this class of machine (seed 003).
    public static let moderate = Argon2Parameters(uncheckedOps: 3, memoryBytes: 256 << 20)

    /// Ceilings accepted from any input: 1 GiB is 4× moderate's memory and 32 passes about
    /// 10× its time; room for users who choose stronger settings, none for absurd ones
    /// (the worst case a hostile header can ask for is tens of seconds, not hours).
    public static let maximumOps: UInt64 = 32
    public static let maximumMemoryBytes: UInt64 = 1 << 30
    /// libsodium's floors for Argon2id.
    public static let minimumOps: UInt64 = 1
    public static let minimumMemoryBytes: UInt64 = 8 << 10

    private init(uncheckedOps ops: UInt64, memoryBytes: UInt64) {
        opsLimit = ops
        self.memoryBytes = memoryBytes
    }

    public init(opsLimit: UInt64, memoryBytes: UInt64) throws(CryptoError) {
        guard (Self.minimumOps...Self.maximumOps).contains(opsLimit) else {
            throw .invalidParameter("Argon2id ops limit \(opsLimit) is outside \(Self.minimumOps)...\(Self.maximumOps)")
        }
        guard (Self.minimumMemoryBytes...Self.maximumMemoryBytes).contains(memoryBytes) else {
            throw .invalidParameter("Argon2id memory \(memoryBytes) bytes is outside \(Self.minimumMemoryBytes)...\(Self.maximumMemoryBytes)")
        }
        self.init(uncheckedOps: opsLimit, memoryBytes: memoryBytes)
    }

    public var description: String { "Argon2id(ops \(opsLimit), memory \(memoryBytes >> 10) KiB)" }
}

/// Argon2id (RFC 9106, version 0x13, one lane) through libsodium's crypto_pwhash.
public enum Argon2id {
    public static let saltLength = Int(crypto_pwhash_SALTBYTES)   // 16

    /// Told before and after each derivation (the parameters; then the seconds it took), so
    /// the CLI can show the seconds Argon2id takes as a phase of its own rather than a
    /// progress bar that seems stuck at 0. Set once, by the CLI, before any work.
    nonisolated(unsafe) public static var observer: ((Argon2Parameters, Double?) -> Void)?

    /// Derives `outputLength` bytes from `password` into locked memory.
    public static func deriveKey(password: SecureBytes, salt: [UInt8], parameters: Argon2Parameters,
                                 outputLength: Int = 32) throws(CryptoError) -> SecureBytes {
        Sodium.ensureInitialized()
        guard salt.count == saltLength else { throw .invalidParameter("Argon2id salt must be \(saltLength) bytes") }
        guard outputLength >= Int(crypto_pwhash_BYTES_MIN), outputLength <= 1024 else {
            throw .invalidParameter("Argon2id output length \(outputLength)")
        }
        let key = try SecureBytes(count: outputLength)
        observer?(parameters, nil)
        var started = timespec()
        clock_gettime(CLOCK_MONOTONIC, &started)
        defer {
            var ended = timespec()
            clock_gettime(CLOCK_MONOTONIC, &ended)
            observer?(parameters, Double(ended.tv_sec - started.tv_sec) + Double(ended.tv_nsec - started.tv_nsec) / 1e9)
        }
        let rc = key.withUnsafeMutableBytes { out in
            password.withUnsafeBytes { pw in
                salt.withUnsafeBytes { s in
                    crypto_pwhash(out.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(out.count),
                                  pw.baseAddress!.assumingMemoryBound(to: CChar.self), UInt64(pw.count),
                                  s.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                  parameters.opsLimit, Int(parameters.memoryBytes),
                                  crypto_pwhash_ALG_ARGON2ID13)
                }
            }
        }
        guard rc == 0 else { throw .keyDerivationFailed }
        return key
    }
}
