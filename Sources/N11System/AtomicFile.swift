import Glibc

/// A file that becomes visible at its final path only when complete: it is written to a
/// temp file in the same directory, fsynced, renamed over the target, and the directory is
/// fsynced (DESIGN.md §4). Until `commit()` the target is untouched; a writer dropped
/// without commit removes its temp file. A kill -9 leaves at most a temp file whose name
/// starts with `tempPrefix`, which `AtomicFile.removeLeftovers(in:)` cleans.
public final class AtomicFile: @unchecked Sendable {
    public static let tempPrefix = ".n11tmp-"

    public let finalPath: String
    public let tempPath: String
    public let descriptor: FileDescriptor
    private var finished = false

    /// - Parameter replaceExisting: when false, commit fails with EEXIST if the target exists
    ///   (it uses link+unlink rather than rename so the check and the publish are one step).
    public init(path: String, mode: mode_t = 0o600) throws {
        finalPath = path
        let dir = Path.directory(of: path)
        let base = Path.lastComponent(of: path)
        var attempt = 0
        while true {
            let candidate = Path.join(dir, "\(AtomicFile.tempPrefix)\(base).\(Path.randomSuffix())")
            do {
                descriptor = try FileDescriptor.createExclusive(candidate, mode: mode)
                tempPath = candidate
                break
            } catch let error as SystemError where error.errno == EEXIST && attempt < 8 {
                attempt += 1
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
            if replaceExisting {
                guard rename(tempPath, finalPath) == 0 else { throw SystemError("cannot rename into place", path: finalPath) }
            } else {
                guard link(tempPath, finalPath) == 0 else { throw SystemError("cannot create", path: finalPath) }
                _ = unlink(tempPath)
            }
            finished = true
            try Directory.sync(Path.directory(of: finalPath))
        } catch {
            if !finished { abort() }
            throw error
        }
    }

    /// Throws the partial file away; the target is untouched.
    public func abort() {
        guard !finished else { return }
        finished = true
        try? descriptor.close()
        _ = unlink(tempPath)
    }

    /// Writes `bytes` to `path` atomically in one call.
    public static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600,
                             replaceExisting: Bool = true) throws {
        let file = try AtomicFile(path: path, mode: mode)
        try file.descriptor.write(bytes)
        try file.commit(replaceExisting: replaceExisting)
    }

    /// Removes temp files a killed run left in `directory`; returns how many.
    @discardableResult
    public static func removeLeftovers(in directory: String) -> Int {
        guard let names = try? Directory.entries(of: directory) else { return 0 }
        var removed = 0
        for name in names where name.hasPrefix(tempPrefix) {
            if unlink(Path.join(directory, name)) == 0 { removed += 1 }
        }
        return removed
    }
}
