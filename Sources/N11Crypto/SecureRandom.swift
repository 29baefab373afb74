internal import CSodium
import Glibc

/// The system CSPRNG (libsodium's randombytes, which uses getrandom(2)).
public enum SecureRandom {
    /// Non-secret random bytes: nonces, salts, IDs. Secrets (keys) come from
    /// `SecureBytes(randomCount:)` instead, straight into locked memory.
    public static func bytes(_ count: Int) -> [UInt8] {
        Sodium.ensureInitialized()
        if count <= RandomPool.largestServed {
            RandomPool.registerForkHandler()
            return RandomPool.shared.take(count)
        }
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

/// Small non-secret values drawn from 4 KiB of the CSPRNG at a time. Restore and `vault add`
/// seal two things for every item, each under a fresh 12-byte nonce, and a getrandom(2)
/// call per nonce was two system calls an item (issue 29). Every byte is handed out once
/// and zeroed as it goes; the pool is refilled whole when what is left is too short. A
/// nonce only has to be unique, which bytes of the same CSPRNG drawn a moment earlier are as
/// much as bytes drawn now. Child processes are posix_spawn'ed, never forked to run on, and
/// a fork's child would still start from an empty pool (`pthread_atfork`), so no two
/// processes hand out the same bytes.
final class RandomPool: @unchecked Sendable {
    static let shared = RandomPool()
    static let size = 4096
    static let largestServed = 64
    private var buffer = [UInt8](repeating: 0, count: RandomPool.size)
    private var next = RandomPool.size
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    /// How many times the pool was filled (for tests: the batching is the point).
    private var fillCount = 0
    var fills: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return fillCount
    }

    init() {
        pthread_mutex_init(mutex, nil)
    }

    /// Registered once, for the shared pool: a fork's child (one thread, the mutex in
    /// whatever state the fork found it) drops what is left rather than hand out the
    /// parent's next bytes.
    private static let forgetsOnFork: Void = {
        pthread_atfork(nil, nil) { RandomPool.shared.next = RandomPool.size }
    }()

    static func registerForkHandler() { _ = forgetsOnFork }

    func take(_ count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= Self.largestServed)
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if buffer.count - next < count {
            // libsodium asks getrandom(2) for at most 256 bytes a call: 4 KiB straight from it
            // would be 16 calls. The ChaCha20 stream of a fresh 32-byte seed is one, and as
            // unpredictable (libsodium's randombytes_buf_deterministic).
            var seed = [UInt8](repeating: 0, count: Int(randombytes_SEEDBYTES))
            randombytes_buf(&seed, seed.count)
            buffer.withUnsafeMutableBytes { randombytes_buf_deterministic($0.baseAddress!, $0.count, seed) }
            sodium_memzero(&seed, seed.count)
            next = 0
            fillCount += 1
        }
        let out = Array(buffer[next..<next + count])
        buffer.withUnsafeMutableBytes { raw in _ = memset(raw.baseAddress! + next, 0, count) }
        next += count
        return out
    }
}
