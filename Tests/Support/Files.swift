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
