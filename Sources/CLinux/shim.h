#ifndef N11_CLINUX_SHIM_H
#define N11_CLINUX_SHIM_H
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <fcntl.h>
#include <errno.h>
#include <stddef.h>
#include <malloc.h>
#include <sys/wait.h>
#include <signal.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <sys/mman.h>

/* prctl is variadic, which Swift cannot call; one fixed-arity wrapper per use. */
static inline int n11_set_not_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}
/* libFuzzer's driver, for the n11fuzz target (linked only in its -sanitize=fuzzer build). */
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const unsigned char *data, size_t size));

/* renameat2(2) through syscall(2), which is variadic (and glibc declares renameat2 only
   under _GNU_SOURCE). Flags: 1 RENAME_NOREPLACE (publish without ever replacing another
   file), 2 RENAME_EXCHANGE (swap two names atomically, so a replaced file can be put back). */
static inline int n11_renameat2(int from_dir, const char *from, int to_dir, const char *to, unsigned int flags) {
#ifdef SYS_renameat2
    return (int)syscall(SYS_renameat2, from_dir, from, to_dir, to, flags);
#else
    errno = ENOSYS;
    return -1;
#endif
}

/* O_NOATIME, which glibc defines only under _GNU_SOURCE (__O_NOATIME always). */
static inline int n11_o_noatime(void) { return __O_NOATIME; }

/* An unnamed file in directory `dir` (O_TMPFILE, read and write): no name to find it by,
   and gone when it is closed or the process dies, even by SIGKILL. -1 with errno
   (EOPNOTSUPP, EISDIR or EINVAL where the file system has no unnamed files). glibc
   defines O_TMPFILE only under _GNU_SOURCE; __O_TMPFILE always. */
static inline int n11_open_unnamed(const char *dir, mode_t mode) {
#ifdef __O_TMPFILE
    return open(dir, __O_TMPFILE | O_DIRECTORY | O_RDWR | O_CLOEXEC, mode);
#else
    errno = EOPNOTSUPP;
    return -1;
#endif
}

/* Whether the first byte of an open file is in the page cache: 1 if a read of it with
   RWF_NOWAIT (preadv2, through syscall(2): glibc declares it only under _GNU_SOURCE)
   returns without waiting for the disk (an empty file counts as cached), 0 if it would have
   waited, -1 if the kernel or file system cannot tell (errno set). */
static inline int n11_first_byte_cached(int fd) {
#ifdef SYS_preadv2
    unsigned char byte;
    struct iovec vector = { &byte, 1 };
    long n = syscall(SYS_preadv2, fd, &vector, 1, 0L, 0L, 0x00000008 /* RWF_NOWAIT */);
    if (n >= 0) return 1;
    return errno == EAGAIN ? 0 : -1;
#else
    errno = ENOSYS;
    return -1;
#endif
}

/* Whether the page holding byte `offset` of an open file is in the page cache, asked with
   mincore(2) on a one-page mapping that is never touched: unlike a probing read, this starts
   no readahead, so the answer cannot be made true by the asking (an RWF_NOWAIT read starts
   the read it would wait for, and on a fast disk the page could arrive before the read
   looked). 1 cached, 0 not, -1 with errno when it cannot be told. */
static inline int n11_page_cached(int fd, long long offset) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || offset < 0) { errno = EINVAL; return -1; }
    off_t start = (off_t)(offset / page * page);
    void *map = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, start);
    if (map == MAP_FAILED) return -1;
    unsigned char resident = 0;
    int result = mincore(map, (size_t)page, &resident);
    int saved = errno;
    munmap(map, (size_t)page);
    if (result != 0) { errno = saved; return -1; }
    return resident & 1;
}

/* splice(2) from a pipe into a file at *offset (advanced by what moved): the bytes go from
   the pipe to the page cache without a copy through user space (a download read from
   rclone's output). Through syscall(2): glibc declares splice only under _GNU_SOURCE. */
static inline long n11_splice_to_file(int pipe_fd, int file_fd, long long *offset, size_t count) {
#ifdef SYS_splice
    long long at = *offset;
    long n = syscall(SYS_splice, pipe_fd, NULL, file_fd, &at, count, 1 /* SPLICE_F_MOVE */);
    if (n > 0) *offset = at;
    return n;
#else
    errno = ENOSYS;
    return -1;
#endif
}

/* F_SETPIPE_SZ (1031), which glibc defines only under _GNU_SOURCE: a pipe's capacity. */
static inline int n11_set_pipe_size(int fd, int size) {
    return fcntl(fd, 1031, size);
}

static inline int n11_rename_noreplace(const char *from, const char *to) {
    return n11_renameat2(AT_FDCWD, from, AT_FDCWD, to, 1 /* RENAME_NOREPLACE */);
}

/* Whether child `pid` has exited (1), is still running (0), or cannot be waited for (-1),
   without reaping it (WNOWAIT): another thread may be in waitpid for it. siginfo_t's
   si_pid sits in a union Swift does not see. */
static inline int n11_child_exited(pid_t pid) {
    siginfo_t info;
    info.si_pid = 0;
    if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0) return -1;
    return info.si_pid != 0;
}

/* Waits until child `pid` has exited, without reaping it (its PID stays taken until the
   caller's waitpid): 0, or -1 with errno. */
static inline int n11_wait_child_exit(pid_t pid) {
    siginfo_t info;
    int rc;
    do { rc = waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT); } while (rc != 0 && errno == EINTR);
    return rc;
}

/* pipe2(2) with O_CLOEXEC: glibc declares pipe2 only under _GNU_SOURCE. Both ends close on
   exec, so a command we start inherits only the end we hand it. */
static inline int n11_pipe_cloexec(int fds[2]) {
    return (int)syscall(SYS_pipe2, fds, O_CLOEXEC);
}

/* memfd_create(2) with MFD_CLOEXEC (1): an anonymous file, for a child's stderr. */
static inline int n11_memfd_cloexec(const char *name) {
    return (int)syscall(SYS_memfd_create, name, 1);
}

/* malloc_trim is declared in <malloc.h>, which the Glibc module does not bring in. */
static inline void n11_release_free_heap(void) {
    malloc_trim(0);
}

/* mallopt(M_MMAP_THRESHOLD): a fixed threshold, which also turns off glibc's raising it. */
static inline int n11_fix_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}

/* syncfs(2): glibc declares it only under _GNU_SOURCE. */
static inline int n11_syncfs(int fd) {
    return (int)syscall(SYS_syncfs, fd);
}

/* sync_file_range(2) with SYNC_FILE_RANGE_WRITE (2): start writeback of a range without
   waiting for it; glibc declares it only under _GNU_SOURCE. */
static inline int n11_start_writeback(int fd, long long offset, long long count) {
#ifdef SYS_sync_file_range
    return (int)syscall(SYS_sync_file_range, fd, offset, count, 2 /* SYNC_FILE_RANGE_WRITE */);
#else
    /* Only advisory: without it the final fsync does all the writing, as before. */
    errno = ENOSYS;
    return -1;
#endif
}

/* Whether `fd` is on a local file system whose direct I/O is known to go to the disk
   around the page cache: ext4, XFS, btrfs. Elsewhere (tmpfs, NFS, FUSE, CIFS) O_DIRECT
   either copies anyway or makes every write a round trip. */
static inline int n11_direct_io_suits(int fd) {
    struct statfs fs;
    if (fstatfs(fd, &fs) != 0) return 0;
    switch ((unsigned long)fs.f_type) {
    case 0xEF53UL:      /* ext2/3/4 */
    case 0x58465342UL:  /* XFS */
    case 0x9123683EUL:  /* btrfs */
        return 1;
    default:
        return 0;
    }
}

/* Turns O_DIRECT on or off for an open file (fcntl is variadic, and glibc names O_DIRECT
   only under _GNU_SOURCE; its value per architecture is __O_DIRECT, which glibc's
   bits/fcntl-linux.h defines without it). 0 on success, -1 with errno (EINVAL where the
   file system takes no direct I/O). */
static inline int n11_set_direct_io(int fd, int on) {
#ifdef __O_DIRECT
    const int direct = __O_DIRECT;
#else
    errno = EINVAL;
    return -1;
#endif
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    return fcntl(fd, F_SETFL, on ? (flags | direct) : (flags & ~direct));
}
#endif
