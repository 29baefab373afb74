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

    public static var coreLimit: UInt64 {
        var limit = rlimit()
        _ = getrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit)
        return UInt64(limit.rlim_cur)
    }
}
