internal import CLinux

public enum Heap {
    /// Hands the heap's free pages back to the system (malloc_trim), so that memory freed
    /// just before a large allocation (Argon2id's) does not count twice in the peak RSS.
    public static func releaseFreePages() { n11_release_free_heap() }
}
