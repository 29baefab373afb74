import Glibc

/// The ssh-style rule for where keys live: the directory is 0700 and the files 0600, both
/// owned by the user running the tool. Anything broader or foreign is refused with the
/// command that fixes it (DESIGN.md §3.5).
public enum PrivatePermissions {
    public enum Violation: Error, CustomStringConvertible, Sendable, Equatable {
        case tooOpen(path: String, mode: mode_t, wanted: mode_t)
        case wrongOwner(path: String, owner: uid_t)
        case notADirectory(path: String)
        case notARegularFile(path: String)

        public var description: String {
            switch self {
            case let .tooOpen(path, mode, wanted):
                return "permissions \(octal(mode)) on '\(path)' are too open; run: chmod \(octal(wanted)) '\(path)'"
            case let .wrongOwner(path, owner):
                return "'\(path)' is owned by uid \(owner), not by you (uid \(getuid())); run: chown \(getuid()) '\(path)'"
            case let .notADirectory(path):
                return "'\(path)' is not a directory"
            case let .notARegularFile(path):
                return "'\(path)' is not a regular file (links are refused)"
            }
        }
    }

    /// Checks a directory that must be private. Group/other bits of any kind are refused.
    public static func checkDirectory(_ path: String) throws -> Void {
        guard let status = try FileStatus.of(path) else { throw SystemError("missing", path: path, errno: ENOENT) }
        guard status.kind == .directory else { throw Violation.notADirectory(path: path) }
        guard status.owner == geteuid() else { throw Violation.wrongOwner(path: path, owner: status.owner) }
        guard status.permissions & 0o077 == 0 else { throw Violation.tooOpen(path: path, mode: status.permissions, wanted: 0o700) }
    }

    /// Checks a file that must be private; symlinks are refused rather than followed.
    public static func checkFile(_ path: String) throws -> Void {
        guard let status = try FileStatus.of(path) else { throw SystemError("missing", path: path, errno: ENOENT) }
        guard status.kind == .regular else { throw Violation.notARegularFile(path: path) }
        guard status.owner == geteuid() else { throw Violation.wrongOwner(path: path, owner: status.owner) }
        guard status.permissions & 0o077 == 0 else { throw Violation.tooOpen(path: path, mode: status.permissions, wanted: 0o600) }
    }

    static func octal(_ mode: mode_t) -> String {
        String(mode, radix: 8).leftPadded(to: 4)
    }
}
