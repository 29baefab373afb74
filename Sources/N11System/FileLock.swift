import Glibc

/// An advisory lock (flock) on a lock file, held until release or process exit: exclusive
/// for writers, shared for readers that must not run beside a writer. An exclusive holder
/// writes its PID into the file so a second process can say who holds it.
public final class FileLock: @unchecked Sendable {
    public enum Outcome: Sendable { case acquired(FileLock), heldBy(pid: Int32?) }

    public let path: String
    private let descriptor: FileDescriptor
    private var released = false

    private init(path: String, descriptor: FileDescriptor) {
        self.path = path
        self.descriptor = descriptor
    }

    /// Called once when an acquire starts to wait (lock path, holder, seconds it will wait
    /// at most): the CLI says so, since a silent wait looks like a hang.
    nonisolated(unsafe) public static var willWait: ((String, Int32?, Double) -> Void)?

    /// Tries to take the lock, waiting up to `waitSeconds` (0: do not wait).
    public static func acquire(_ path: String, shared: Bool = false, waitSeconds: Double = 0) throws -> Outcome {
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SystemError("cannot open lock file", path: path) }
        let descriptor = FileDescriptor(adopting: fd, path: path)
        // A lock file someone else made (in a directory they can write to) would let them
        // hold it, and block us, whenever they like: ours is a 0600 file of our own.
        let status = try descriptor.status()
        guard status.kind == .regular else { throw PrivatePermissions.Violation.notARegularFile(path: path) }
        guard status.owner == geteuid() else { throw PrivatePermissions.Violation.wrongOwner(path: path, owner: status.owner) }
        var waited = 0.0
        while flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0 {
            guard Glibc.errno == EWOULDBLOCK || Glibc.errno == EINTR else {
                throw SystemError("cannot lock", path: path)
            }
            if waited >= waitSeconds { return .heldBy(pid: readHolder(descriptor)) }
            if waited == 0 { willWait?(path, readHolder(descriptor), waitSeconds) }
            usleep(100_000)
            waited += 0.1
        }
        if shared { return .acquired(FileLock(path: path, descriptor: descriptor)) }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        try? descriptor.seek(to: 0)
        try? descriptor.write(pid)
        return .acquired(FileLock(path: path, descriptor: descriptor))
    }

    private static func readHolder(_ descriptor: FileDescriptor) -> Int32? {
        try? descriptor.seek(to: 0)
        guard let bytes = try? descriptor.readAll(limit: 64) else { return nil }
        return Int32(String(decoding: bytes, as: UTF8.self).trimmingWhitespace())
    }

    /// Gives the lock up now (a lock dropped without this is given up when it is freed).
    public func release() {
        guard !released else { return }
        released = true
        _ = flock(descriptor.rawValue, LOCK_UN)
    }

    /// Runs `body` and then releases `lock`, if there is one: the lock's scope is the call,
    /// not however long the optimiser keeps an unused reference alive.
    public static func withLock<T>(_ lock: FileLock?, _ body: () throws -> T) rethrows -> T {
        defer { lock?.release() }
        return try body()
    }

    deinit { release() }
}

extension String {
    public func trimmingWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }
        guard let first = firstIndex(where: { !isSpace($0) }),
              let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
