internal import CLinux
import Glibc

/// Keeps secrets out of core dumps (DESIGN.md §3.7): no core file, and the process is not
/// dumpable (which also stops other processes of the same user from ptrace-reading it).
public enum ProcessHardening {
    public static func disableCoreDumps() {
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit)
        _ = n11_set_not_dumpable()
    }

    /// How many descriptors this process may hold open (RLIMIT_NOFILE's soft limit).
    public static var openFilesLimit: Int {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        return Int(clamping: limit.rlim_cur)   // RLIM_INFINITY is the largest value: Int.max
    }

    public static var coreLimit: UInt64 {
        var limit = rlimit()
        _ = getrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit)
        return UInt64(limit.rlim_cur)
    }
}
