import Glibc

/// Path-based changes for the layers above, which call no C: each throws the system error
/// (with its errno) and treats a missing path as already done when `missingIsDone` (journal
/// replays and clean-ups run again after a crash).
public enum FileSystem {
    /// Sets a file's permission bits (chmod).
    public static func setMode(_ path: String, _ mode: mode_t) throws(SystemError) {
        guard chmod(path, mode) == 0 else { throw SystemError("cannot set the mode of", path: path) }
    }

    /// Whether process `pid` of this machine is gone (a holder of a lock that died).
    public static func processIsGone(_ pid: Int32) -> Bool {
        kill(pid, 0) != 0 && errno == ESRCH
    }

    /// unlink(2): removes a file (never a directory, never through a link's target).
    public static func removeFile(_ path: String, missingIsDone: Bool = true) throws(SystemError) {
        guard unlink(path) == 0 || (missingIsDone && errno == ENOENT) else { throw SystemError("cannot remove", path: path) }
    }

    /// Whether the file system holding `path` is mounted read-only.
    public static func isReadOnly(containing path: String) -> Bool {
        var info = statvfs()
        return statvfs(path, &info) == 0 && (info.f_flag & UInt(ST_RDONLY)) != 0
    }

    /// rmdir(2): removes an empty directory; never a recursive removal.
    public static func removeEmptyDirectory(_ path: String, missingIsDone: Bool = true) throws(SystemError) {
        guard rmdir(path) == 0 || (missingIsDone && errno == ENOENT) else {
            throw SystemError("cannot remove the directory", path: path)
        }
    }

    /// rename(2), replacing `target`; a missing `source` counts as already moved when
    /// `missingIsDone`.
    public static func move(_ source: String, to target: String, missingIsDone: Bool = true) throws(SystemError) {
        guard rename(source, target) == 0 || (missingIsDone && errno == ENOENT) else {
            throw SystemError("cannot move into place", path: target)
        }
    }
}
