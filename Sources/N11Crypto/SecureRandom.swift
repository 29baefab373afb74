internal import CSodium

/// The system CSPRNG (libsodium's randombytes, which uses getrandom(2)).
public enum SecureRandom {
    /// Non-secret random bytes: nonces, salts, IDs.
    public static func bytes(_ count: Int) -> [UInt8] {
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
        return out
    }

    /// A uniform integer in 0..<upperBound without modulo bias.
    public static func uniform(below upperBound: UInt32) -> UInt32 {
        Sodium.ensureInitialized()
        return randombytes_uniform(upperBound)
    }
}
