import Foundation
import Glibc
import N11System

// File helpers shared by the test targets: a private temp directory per test, whole-file
// bytes, existence and size (lstat, so a link is not followed), directory listings, and
// in-place corruption.

/// Makes a fresh directory `/tmp/<prefix>-XXXXXX` with mkdtemp (mode 0700) and returns its path.
public func makeTemporaryDirectory(prefix: String = "n11-tests") throws -> String {
    var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    guard made != nil else { throw SystemError("mkdtemp", path: "/tmp") }
    return template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

/// Runs `body` with a fresh directory made by mkdtemp under /tmp, removed afterwards
/// (a closure rather than an object, so the directory cannot vanish while the body runs).
public func withTemporaryDirectory<T>(prefix: String = "n11-tests", _ body: (String) throws -> T) throws -> T {
    let path = try makeTemporaryDirectory(prefix: prefix)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}

public func readBytes(_ path: String) throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: path)))
}

/// Writes `bytes` to `path` (created or truncated, 0666 less the umask) through a descriptor
/// that is closed on exec: the tests run in parallel in one process, and a descriptor open
/// for writing that a server another test starts inherits keeps the file "busy", so running
/// it as a script fails with ETXTBSY ("Text file busy": a CI run's rclone wrapper).
public func writeBytes(_ bytes: [UInt8], to path: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
    guard fd >= 0 else { throw SystemError("cannot create", path: path) }
    defer { close(fd) }
    var done = 0
    while done < bytes.count {
        let n = bytes[done...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw SystemError("cannot write", path: path)
        }
        done += n
    }
}

/// Whether anything (even a dangling link) is at `path`.
public func exists(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0
}

/// Size of `path` (lstat), or nil if nothing is there.
public func fileSize(_ path: String) -> Int64? {
    var st = stat()
    guard lstat(path, &st) == 0 else { return nil }
    return Int64(st.st_size)
}

/// Names in a directory (hidden ones included), sorted; empty if it cannot be listed
/// (e.g. it does not exist).
public func listing(of path: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
}

/// XORs one byte of a file in place.
public func flipByte(in path: String, at offset: Int, mask: UInt8 = 0x01) throws {
    var bytes = try readBytes(path)
    bytes[offset] ^= mask
    try writeBytes(bytes, to: path)
}

/// How many of the file's pages are in the page cache, and how many it has (mmap and
/// mincore; the mapping is never touched). Opens and closes a descriptor of the file, which
/// drops every POSIX lock this process holds on it: not while a connection has one.
public func residentPages(_ path: String) throws -> (resident: Int, pages: Int) {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw SystemError("cannot open", path: path) }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0 else { throw SystemError("cannot stat", path: path) }
    let size = Int(st.st_size), page = Int(sysconf(Int32(_SC_PAGESIZE)))
    guard size > 0 else { return (0, 0) }
    guard let map = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else {
        throw SystemError("cannot map", path: path)
    }
    defer { munmap(map, size) }
    var resident = [UInt8](repeating: 0, count: (size + page - 1) / page)
    guard mincore(map, size, &resident) == 0 else { throw SystemError("cannot ask which pages are cached", path: path) }
    return (resident.filter { $0 & 1 == 1 }.count, resident.count)
}

/// Writes back and drops `path`'s pages from the page cache (fsync, then
/// `POSIX_FADV_DONTNEED`), as if the kernel had not read the file lately; returns false when
/// the file system kept any (a test of a cold read cannot tell then).
public func dropFromPageCache(_ path: String) throws -> Bool {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw SystemError("cannot open", path: path) }
    defer { close(fd) }
    guard fsync(fd) == 0, posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0 else { return false }
    return try residentPages(path).resident == 0
}

/// The file system type under `path` (statfs's magic number), asked of `stat -f` (the
/// Glibc module does not bring `statfs`).
public func fileSystemMagic(_ path: String) throws -> UInt {
    let stat = Process()
    stat.executableURL = URL(fileURLWithPath: "/usr/bin/stat")
    stat.arguments = ["-f", "-c", "%t", path]
    let out = Pipe()
    stat.standardOutput = out
    try stat.run()
    let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    stat.waitUntilExit()
    guard let magic = UInt(text.trimmingCharacters(in: .whitespacesAndNewlines), radix: 16) else {
        throw SystemError("cannot tell the file system of", path: path, errno: 0)
    }
    return magic
}

/// Whether the file system under `path` is one the tool asks for direct I/O (ext4, XFS,
/// btrfs: the rule of `n11_direct_io_suits`).
public func takesDirectIO(_ path: String) throws -> Bool {
    [0xEF53, 0x5846_5342, 0x9123_683E].contains(try fileSystemMagic(path))
}
