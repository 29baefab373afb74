internal import CLinux
import Glibc

/// What the page cache holds of a file, asked without waiting for the disk.
enum PageCache {
    /// Whether the first byte of the open file `fd` is in the page cache (a read of it with
    /// `RWF_NOWAIT` returns at once; an empty file counts as cached); nil when the kernel or
    /// the file system cannot tell.
    static func holdsFirstByte(of fd: Int32) -> Bool? { holdsByte(of: fd, at: 0) }

    /// Whether the byte at `offset` of the open file `fd` is in the page cache (a byte past
    /// the end counts as cached); nil when the kernel or the file system cannot tell.
    static func holdsByte(of fd: Int32, at offset: Int64) -> Bool? {
        switch n11_byte_cached(fd, offset) {
        case 1: return true
        case 0: return false
        default: return nil
        }
    }
}
