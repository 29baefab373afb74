internal import CLinux
import Glibc

/// An open file descriptor owned by exactly one object, closed when that object goes away.
public final class FileDescriptor: @unchecked Sendable {
    public let rawValue: Int32
    public let path: String
    private var isClosed = false

    private let ownsDescriptor: Bool

    public init(adopting rawValue: Int32, path: String) {
        self.rawValue = rawValue
        self.path = path
        ownsDescriptor = true
    }

    /// Uses a descriptor someone else owns (stdin, an inherited --password-fd) without closing it.
    public init(borrowing rawValue: Int32, path: String) {
        self.rawValue = rawValue
        self.path = path
        ownsDescriptor = false
    }

    /// Opens an existing file for reading. O_NOFOLLOW is not used: reading through a
    /// symlink the user named is fine; the caller checks the file type with `status()`.
    /// `checkingFirst`: a FIFO or terminal that took the path's place since it was checked
    /// opens without waiting for a writer or becoming the controlling terminal (O_NONBLOCK,
    /// O_NOCTTY), for the caller's `status()` to refuse; a regular file reads the same.
    /// `leavingAccessTime`: see `openLeavingAccessTime`.
    public static func openForReading(_ path: String, checkingFirst: Bool = false, leavingAccessTime: Bool = false) throws -> FileDescriptor {
        let flags = O_RDONLY | O_CLOEXEC | (checkingFirst ? O_NONBLOCK | O_NOCTTY : 0)
        let fd = leavingAccessTime ? openLeavingAccessTime(path, flags) : Glibc.open(path, flags)
        guard fd >= 0 else { throw SystemError("cannot open", path: path) }
        return FileDescriptor(adopting: fd, path: path)
    }

    /// `open(2)` of a file to read whose reads are not to count as accesses (O_NOATIME):
    /// the files `vault add` takes and the vault's own, as restic and borg read. Otherwise
    /// the first read after each change, and on a `relatime` mount the first each day, writes
    /// the file's inode for its access time: a nightly `create` wrote an inode per vault file
    /// it read, and `vault add` one per file it took. Only a file's owner (or a process with
    /// CAP_FOWNER, such as root) may ask; the kernel refuses it for any other file with
    /// EPERM before opening anything, and that file is opened as usual: two `open`s.
    public static func openLeavingAccessTime(_ path: String, _ flags: Int32) -> Int32 {
        let fd = Glibc.open(path, flags | n11_o_noatime())
        guard fd < 0, Glibc.errno == EPERM else { return fd }
        return Glibc.open(path, flags)
    }

    /// Opens a directory (for fsync and locking).
    public static func openDirectory(_ path: String) throws -> FileDescriptor {
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError("cannot open directory", path: path) }
        return FileDescriptor(adopting: fd, path: path)
    }

    /// Creates a new file that must not exist yet (O_EXCL), never following a link. Open for
    /// reading too: a new archive is read back through the same descriptor for its SHA-256
    /// before it is published, never by a path that could be swapped meanwhile.
    public static func createExclusive(_ path: String, mode: Glibc.mode_t) throws -> FileDescriptor {
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw SystemError("cannot create", path: path) }
        return FileDescriptor(adopting: fd, path: path)
    }

    /// A new file with no name in `directory`, for reading and writing: gone when closed or
    /// when the process ends however it ends. Where the file system has no unnamed files, a
    /// file of a random name is created there (O_EXCL, 0600) and its name removed at once.
    public static func createUnnamed(in directory: String) throws -> FileDescriptor {
        let fd = n11_open_unnamed(directory, 0o600)
        if fd >= 0 { return FileDescriptor(adopting: fd, path: directory) }
        guard [EOPNOTSUPP, EISDIR, EINVAL].contains(errno) else { throw SystemError("cannot create a temporary file in", path: directory) }
        var random = [UInt8](repeating: 0, count: 8)
        _ = getrandom(&random, random.count, 0)
        let path = directory + "/.n11spool-" + random.hex
        let file = try createExclusive(path, mode: 0o600)
        _ = unlink(path)
        return file
    }

    deinit { if !isClosed && ownsDescriptor { _ = Glibc.close(rawValue) } }

    public func close() throws {
        guard !isClosed else { return }
        isClosed = true
        guard ownsDescriptor else { return }
        if Glibc.close(rawValue) != 0 { throw SystemError("cannot close", path: path) }
    }

    /// A second descriptor of the same open file (close-on-exec), for a reader on another
    /// thread that must outlive this one's owner: pread on either does not move the other.
    public func duplicate() throws -> FileDescriptor {
        let copy = fcntl(rawValue, F_DUPFD_CLOEXEC, 0)
        guard copy >= 0 else { throw SystemError("cannot duplicate the descriptor of", path: path) }
        return FileDescriptor(adopting: copy, path: path)
    }

    public func status() throws -> FileStatus {
        var st = stat()
        guard fstat(rawValue, &st) == 0 else { throw SystemError("cannot stat", path: path) }
        return FileStatus(st)
    }

    /// Reads up to `count` bytes into `buffer[offset...]`, retrying on EINTR; 0 means end of file.
    public func read(into buffer: inout [UInt8], offset: Int = 0, count: Int) throws -> Int {
        precondition(offset >= 0 && count >= 0 && offset + count <= buffer.count)
        while true {
            let n = buffer.withUnsafeMutableBytes { raw in
                Glibc.read(rawValue, raw.baseAddress! + offset, count)
            }
            if n >= 0 { return n }
            if Glibc.errno != EINTR { throw SystemError("cannot read", path: path) }
        }
    }

    /// Reads up to `count` bytes at file offset `position` (pread: the descriptor's own offset
    /// is left alone, so another thread may use it meanwhile); 0 means end of file.
    public func read(into buffer: inout [UInt8], count: Int, at position: Int64) throws -> Int {
        precondition(count >= 0 && count <= buffer.count)
        while true {
            let n = buffer.withUnsafeMutableBytes { raw in Glibc.pread(rawValue, raw.baseAddress!, count, off_t(position)) }
            if n >= 0 { return n }
            if Glibc.errno != EINTR { throw SystemError("cannot read", path: path) }
        }
    }

    /// Fills `buffer[0..<count]` unless the file ends first; returns how many bytes were read.
    public func readFully(into buffer: inout [UInt8], count: Int) throws -> Int {
        var filled = 0
        while filled < count {
            let n = try read(into: &buffer, offset: filled, count: count - filled)
            if n == 0 { break }
            filled += n
        }
        return filled
    }

    /// Reads the whole file (for small files only: metadata, key store); refuses more than `limit`.
    public func readAll(limit: Int) throws -> [UInt8] {
        var result: [UInt8] = []
        // Not zeroed: only what read() wrote is used, and zeroing 64 KiB for every 200-byte
        // metadata record was most of the cost of loading a 20,000-item catalogue.
        var chunk = [UInt8](unsafeUninitializedCapacity: 64 * 1024) { _, count in count = 64 * 1024 }
        while true {
            let n = try read(into: &chunk, count: chunk.count)
            if n == 0 { return result }
            guard result.count + n <= limit else { throw SystemError("file too large", path: path, errno: EFBIG) }
            result.append(contentsOf: chunk[0..<n])
        }
    }

    /// Writes all of `raw`, retrying short writes and EINTR. Raw because the crypto layer
    /// writes straight from locked memory; everyone else uses the array overloads.
    public func write(raw: UnsafeRawBufferPointer) throws {
        var done = 0
        while done < raw.count {
            let n = Glibc.write(rawValue, raw.baseAddress! + done, raw.count - done)
            if n < 0 {
                if Glibc.errno == EINTR { continue }
                throw SystemError("cannot write", path: path)
            }
            done += n
        }
    }

    /// Writes all of `bytes` at `offset` (pwrite: threads writing different parts of one file
    /// share the descriptor), retrying short writes and EINTR.
    public func write(_ bytes: ArraySlice<UInt8>, at offset: Int64) throws {
        try bytes.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = pwrite(rawValue, raw.baseAddress! + done, raw.count - done, off_t(offset + Int64(done)))
                if n < 0 {
                    if Glibc.errno == EINTR { continue }
                    throw SystemError("cannot write", path: path)
                }
                done += n
            }
        }
    }

    /// Asks for a pipe of `bytes` capacity (at most /proc/sys/fs/pipe-max-size, 1 MiB by
    /// default): a producer then runs that far ahead before it waits. Only a hint.
    public func setPipeCapacity(_ bytes: Int) {
        _ = n11_set_pipe_size(rawValue, Int32(bytes))
    }

    /// Moves up to `count` bytes from the pipe `pipe` into this file at `offset` (splice(2):
    /// not through user space); 0 at the pipe's end. Falls back to a read and a pwrite where
    /// the file system takes no splice.
    public func splice(from pipe: FileDescriptor, at offset: Int64, count: Int) throws -> Int {
        var at = offset
        while true {
            let n = n11_splice_to_file(pipe.rawValue, rawValue, &at, count)
            if n >= 0 { return n }
            if Glibc.errno == EINTR { continue }
            if Glibc.errno == EINVAL || Glibc.errno == ENOSYS {
                var buffer = [UInt8](repeating: 0, count: min(count, 1 << 20))
                let got = try pipe.read(into: &buffer, count: buffer.count)
                try write(buffer[0..<got], at: offset)
                return got
            }
            throw SystemError("cannot write", path: path)
        }
    }

    public func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { raw in try write(raw: raw) }
    }

    public func write(_ bytes: ArraySlice<UInt8>) throws {
        try bytes.withUnsafeBytes { raw in try write(raw: raw) }
    }

    public func seek(to offset: Int64) throws {
        guard lseek(rawValue, off_t(offset), SEEK_SET) >= 0 else { throw SystemError("cannot seek", path: path) }
    }

    public func sync() throws {
        guard fsync(rawValue) == 0 else { throw SystemError("cannot fsync", path: path) }
    }

    /// Sets the file's modification (and access) time, to the second (futimens).
    public func setModificationTime(secondsSince1970 seconds: Int64) throws {
        var times = [timespec(tv_sec: Int(seconds), tv_nsec: 0), timespec(tv_sec: Int(seconds), tv_nsec: 0)]
        guard futimens(rawValue, &times) == 0 else { throw SystemError("cannot set the modification time of", path: path) }
    }

    /// Asks the kernel to start writing `count` bytes at `offset` of the open file `fd` to
    /// disk, without waiting. A writer of a big file calls this as it goes, so its final
    /// fsync finds little left to do. Advisory: errors surface at that fsync, not here.
    public static func startWriteback(_ fd: Int32, offset: Int64, count: Int) {
        _ = n11_start_writeback(fd, offset, Int64(count))
    }

    /// `startWriteback` of the whole file: for a writer of many files made durable together
    /// later (one syncfs), so that a large file goes to disk while the next ones are made
    /// instead of all of them at that syncfs.
    public func startWritebackOfAll() {
        Self.startWriteback(rawValue, offset: 0, count: 0)
    }

    /// From this size up a finished file's writeback is started at once (`startWritebackOfAll`);
    /// below it the system call would cost more than the overlap gains (a note is a page).
    public static let writebackAtOnceFrom: Int64 = 1 << 20
}

/// The parts of `stat` the tool decides on.
public struct FileStatus: Sendable {
    public enum Kind: Sendable { case regular, directory, symlink, other }
    public let kind: Kind
    public let permissions: Glibc.mode_t
    public let owner: Glibc.uid_t
    public let size: Int64
    /// The modification time, in whole seconds since 1970.
    public let modifiedSeconds: Int64
    /// Which file this is, whatever path reached it (device and inode numbers).
    public let identity: FileIdentity

    /// Whether this process's user owns it.
    public var isOwnedByCurrentUser: Bool { owner == geteuid() }

    public struct FileIdentity: Sendable, Equatable {
        let device: UInt64
        let inode: UInt64
    }

    init(_ st: stat) {
        switch st.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symlink
        default: kind = .other
        }
        permissions = st.st_mode & 0o7777
        owner = st.st_uid
        size = Int64(st.st_size)
        modifiedSeconds = Int64(st.st_mtim.tv_sec)
        identity = FileIdentity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
    }

    /// `lstat` of a path; nil if nothing is there.
    public static func of(_ path: String, followLinks: Bool = false) throws -> FileStatus? {
        var st = stat()
        let rc = followLinks ? stat(path, &st) : lstat(path, &st)
        if rc == 0 { return FileStatus(st) }
        if Glibc.errno == ENOENT { return nil }
        throw SystemError("cannot stat", path: path)
    }
}
