internal import CLinux
import Glibc

/// What the page cache holds of a file, asked without waiting for the disk.
enum PageCache {
    /// Whether the first byte of the open file `fd` is in the page cache (a read of it with
    /// `RWF_NOWAIT` returns at once; an empty file counts as cached); nil when the kernel or
    /// the file system cannot tell.
    static func holdsFirstByte(of fd: Int32) -> Bool? {
        switch n11_first_byte_cached(fd) {
        case 1: return true
        case 0: return false
        default: return nil
        }
    }

    /// Whether the page holding byte `offset` of the open file `fd` is in the page cache,
    /// asked without starting a read of it (`mincore` on a mapping of that page, never
    /// touched); nil when the kernel cannot tell.
    static func holdsPage(of fd: Int32, at offset: Int64) -> Bool? {
        switch n11_page_cached(fd, offset) {
        case 1: return true
        case 0: return false
        default: return nil
        }
    }
}
