internal import CLinux

public enum Heap {
    /// Hands the heap's free pages back to the system (malloc_trim), so that memory freed
    /// just before a large allocation (Argon2id's) does not count twice in the peak RSS.
    public static func releaseFreePages() { n11_release_free_heap() }

    /// Allocations of 128 KiB and more are mapped on their own and unmapped when freed. glibc
    /// starts there but raises the threshold to the size of each such block freed, after which
    /// a long run's large arrays (a manifest page's 4,096 items, made on one thread and freed
    /// on another) leave holes in the heap: `create`'s RSS grew from 70 MiB at 100,000 notes
    /// to 88 MiB at 1,000,000 while its heap peak stayed at 43 MiB (heaptrack); fixed at
    /// 128 KiB, 74–76 MiB (BENCHMARKS.md).
    public static func fixLargeAllocationThreshold() { _ = n11_fix_mmap_threshold(128 << 10) }
}
