internal import CLinux
import Glibc

/// A file that becomes visible at its final path only when complete: it is written to a
/// temp file in the same directory, fsynced, renamed over the target, and the directory is
/// fsynced (DESIGN.md §4). Until `commit()` the target is untouched; a writer dropped
/// without commit removes its temp file. A kill -9 leaves at most a temp file named
/// `.n11tmp-<pid>-…`, which `AtomicFile.removeLeftovers(in:)` cleans once that process is gone.
public final class AtomicFile: @unchecked Sendable {
    public static let tempPrefix = ".n11tmp-"

    public let finalPath: String
    public let tempPath: String
    public let descriptor: FileDescriptor
    private var finished = false
    /// Removes the temp file if Ctrl-C or SIGTERM ends the process first (`Interruption`).
    private var interruptCleanup: Interruption.Token?

    public init(path: String, mode: Glibc.mode_t = 0o600) throws {
        finalPath = path
        let dir = Path.directory(of: path)
        let base = Path.lastComponent(of: path)
        var attempt = 0
        while true {
            let candidate = Path.join(dir, AtomicFile.tempName(for: base))
            // Registered before the file exists, so no moment has it without its cleanup.
            let cleanup = Interruption.onInterrupt { _ = unlink(candidate) }
            do {
                descriptor = try FileDescriptor.createExclusive(candidate, mode: mode)
                tempPath = candidate
                interruptCleanup = cleanup
                break
            } catch let error as SystemError where error.errno == EEXIST && attempt < 8 {
                Interruption.cancel(cleanup)
                attempt += 1
            } catch let error as SystemError {
                Interruption.cancel(cleanup)
                // Name the file the user asked for, not our hidden temp name beside it.
                throw SystemError("cannot create", path: path, errno: error.errno)
            } catch {
                Interruption.cancel(cleanup)
                throw error
            }
        }
        // The umask may have narrowed the mode; never widen, but make sure it is exactly `mode`.
        _ = fchmod(descriptor.rawValue, mode)
    }

    deinit { if !finished { abort() } }

    /// Publishes the file. With `replaceExisting == false` an existing target is left alone and
    /// the call fails with EEXIST.
    public func commit(replaceExisting: Bool = true) throws {
        precondition(!finished, "AtomicFile committed twice")
        do {
            try descriptor.sync()
            try descriptor.close()
            try Self.publish(tempPath, to: finalPath, replaceExisting: replaceExisting)
            finished = true
            if let interruptCleanup { Interruption.cancel(interruptCleanup) }
            try Directory.sync(Path.directory(of: finalPath))
        } catch {
            if !finished { abort() }
            throw error
        }
    }

    /// Renames a finished temp file into place. Without `replaceExisting` an existing target
    /// is never replaced (EEXIST): renameat2(RENAME_NOREPLACE) where the file system has it,
    /// else link+unlink, else (vfat, some network file systems: no hard links either) a check
    /// followed by a rename, whose small window is the best such file systems allow.
    public static func publish(_ temp: String, to target: String, replaceExisting: Bool) throws {
        try publish(temp, to: target, replaceExisting: replaceExisting, renameNoReplace: { n11_rename_noreplace($0, $1) },
                    hardLink: { link($0, $1) })
    }

    /// The same, with the two calls a file system may lack given: the tests take each
    /// fallback by making them fail as such a file system does (setting errno).
    static func publish(_ temp: String, to target: String, replaceExisting: Bool,
                        renameNoReplace: (String, String) -> Int32, hardLink: (String, String) -> Int32) throws {
        if replaceExisting {
            guard rename(temp, target) == 0 else { throw SystemError("cannot move into place", path: target) }
            return
        }
        if renameNoReplace(temp, target) == 0 { return }
        guard [EINVAL, ENOSYS, EOPNOTSUPP].contains(errno) else { throw SystemError("cannot move into place", path: target) }
        if hardLink(temp, target) == 0 { _ = unlink(temp); return }
        guard [EPERM, EOPNOTSUPP, EXDEV].contains(errno) else { throw SystemError("cannot move into place", path: target) }
        if (try? FileStatus.of(target)) ?? nil != nil { throw SystemError("cannot move into place", path: target, errno: EEXIST) }
        guard rename(temp, target) == 0 else { throw SystemError("cannot move into place", path: target) }
    }

    /// Throws the partial file away; the target is untouched.
    public func abort() {
        guard !finished else { return }
        finished = true
        try? descriptor.close()
        _ = unlink(tempPath)
        if let interruptCleanup { Interruption.cancel(interruptCleanup) }
    }

    /// Writes `bytes` to `path` atomically in one call.
    public static func write(_ bytes: [UInt8], to path: String, mode: Glibc.mode_t = 0o600,
                             replaceExisting: Bool = true) throws {
        let file = try AtomicFile(path: path, mode: mode)
        try file.descriptor.write(bytes)
        try file.commit(replaceExisting: replaceExisting)
    }

    /// A temp name in this process's namespace: `.n11tmp-<pid>-<base>.<random>`. The PID
    /// lets a later run tell a dead writer's leftovers from a live writer's work in progress.
    public static func tempName(for base: String) -> String {
        "\(tempPrefix)\(getpid())-\(base).\(Path.randomSuffix())"
    }

    /// Removes temp files in `directory` whose writing process no longer exists (names that
    /// carry no PID are stale by definition); returns how many. Files of live processes,
    /// another `create` into the same directory say, are left alone, and so is anything we
    /// cannot have written: a link, a directory, a file of another user (the directory may
    /// be shared, and the name is easy to plant).
    @discardableResult
    public static func removeLeftovers(in directory: String) -> Int {
        // Filtered as listed: the directory may be a vault's Notes/, with millions of names.
        guard let handle = try? DirectoryHandle.open(directory, followingLink: true),
              let names = try? handle.entries(where: { $0.hasPrefix(tempPrefix) }) else { return 0 }
        var removed = 0
        for name in names where !isLive(name) {
            guard let status = try? handle.status(of: name), status.kind == .regular, status.owner == geteuid() else { continue }
            if (try? handle.removeFile(name)) != nil { removed += 1 }
        }
        return removed
    }

    /// Whether the process named in a temp name is still running (kill(pid, 0) succeeds or
    /// is refused for lack of permission).
    public static func isLive(_ name: String) -> Bool {
        let digits = name.dropFirst(tempPrefix.count).prefix { $0.isASCII && $0.isNumber }
        guard let pid = Int32(digits), pid > 0, name.dropFirst(tempPrefix.count + digits.count).first == "-" else { return false }
        return isRunning(pid)
    }

    /// Whether process `pid` is running (kill(pid, 0) succeeds or is refused for lack of
    /// permission).
    public static func isRunning(_ pid: Int32) -> Bool {
        pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)
    }
}
