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
        /// A directory above the key store that another user could rename or replace things in.
        case unsafeAncestor(path: String, owner: uid_t, mode: mode_t, of: String)
        /// A place we act in (a vault) that another user owns: they could change what we do there.
        case belongsToOther(path: String, owner: uid_t)
        /// A place we act in that others may write to.
        case writableByOthers(path: String, mode: mode_t)

        /// What is wrong, without the command that would fix it (for a place where that
        /// command is not the fix: a shared directory given as a private one).
        public var problem: String {
            switch self {
            case let .tooOpen(_, mode, _), let .writableByOthers(_, mode): return "its mode is \(octal(mode))"
            case let .wrongOwner(_, owner), let .belongsToOther(_, owner): return "it belongs to uid \(owner)"
            case let .unsafeAncestor(path, _, _, _): return "'\(path)' above it can be changed by others"
            case .notADirectory: return "it is not a directory"
            case .notARegularFile: return "it is not a regular file"
            }
        }

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
            case let .unsafeAncestor(path, owner, mode, what):
                if owner != 0 && owner != geteuid() {
                    return "'\(path)', a directory above \(what), belongs to uid \(owner): that user could replace \(what); keep it under directories owned by you or root"
                }
                return "'\(path)', a directory above \(what), is writable by others (\(octal(mode))) without the sticky bit: they could replace \(what); run: chmod go-w '\(path)'"
            case let .belongsToOther(path, owner):
                // chown would need root, and the other user could still have planted anything.
                return "'\(path)' belongs to uid \(owner), not to you (uid \(geteuid())): its owner could change what n11archive does there; use a directory you made yourself"
            case let .writableByOthers(path, mode):
                return "'\(path)' is writable by others (\(octal(mode))): they could change what n11archive does there; run: chmod go-w '\(path)' (on a Windows or network mount that ignores chmod, mount it with a umask or dir_mode that leaves others out)"
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

    /// The same checks on what was actually opened: an open directory's and an open file's
    /// descriptor, so nothing swapped in after a path check can pass.
    public static func checkDirectory(_ directory: DirectoryHandle) throws {
        let status = try directory.status()
        guard status.kind == .directory else { throw Violation.notADirectory(path: directory.path) }
        guard status.owner == geteuid() else { throw Violation.wrongOwner(path: directory.path, owner: status.owner) }
        guard status.permissions & 0o077 == 0 else { throw Violation.tooOpen(path: directory.path, mode: status.permissions, wanted: 0o700) }
    }

    public static func checkFile(_ file: FileDescriptor) throws {
        let status = try file.status()
        guard status.kind == .regular else { throw Violation.notARegularFile(path: file.path) }
        guard status.owner == geteuid() else { throw Violation.wrongOwner(path: file.path, owner: status.owner) }
        guard status.permissions & 0o077 == 0 else { throw Violation.tooOpen(path: file.path, mode: status.permissions, wanted: 0o600) }
    }

    /// Checks a place we act in that others may read but must not change (a vault and what
    /// is in it): the user's own, not a link unless `status` was taken through one the user
    /// named, and writable by nobody else. Root's files count too only when root runs us.
    public static func checkOnlyUserCanChange(_ path: String, status: FileStatus) throws(Violation) {
        guard status.owner == geteuid() else { throw .belongsToOther(path: path, owner: status.owner) }
        guard status.permissions & 0o022 == 0 else { throw .writableByOthers(path: path, mode: status.permissions) }
    }

    /// Every directory above `path` (after resolving links, as OpenSSH's StrictModes does)
    /// must belong to root or the user and be writable by nobody else, unless it has the
    /// sticky bit (/tmp): otherwise another user could move the private directory aside
    /// and put one of their own in its place.
    public static func checkAncestors(of path: String, what: String = "your key store") throws {
        guard let resolved = realpath(path, nil) else { throw SystemError("cannot resolve", path: path) }
        let current = String(cString: resolved)
        free(resolved)
        guard current != "/" else { return }
        try checkFromDirectory(Path.directory(of: current), what: what)
    }

    /// The same rule for a place that does not exist yet: the nearest directory above it
    /// that exists, and every one above that, are where it will be made.
    public static func checkAncestors(ofNew path: String, what: String) throws {
        var existing = Path.directory(of: Path.absolute(path))
        while try FileStatus.of(existing, followLinks: true) == nil, existing != "/" { existing = Path.directory(of: existing) }
        guard let resolved = realpath(existing, nil) else { throw SystemError("cannot resolve", path: existing) }
        let current = String(cString: resolved)
        free(resolved)
        try checkFromDirectory(current, what: what)
    }

    /// `directory` (resolved) and each one above it, up to `/`.
    private static func checkFromDirectory(_ directory: String, what: String) throws {
        var current = directory
        while true {
            if let status = try FileStatus.of(current, followLinks: true) {
                let foreign = status.owner != 0 && status.owner != geteuid()
                let writableByOthers = status.permissions & 0o022 != 0 && status.permissions & mode_t(S_ISVTX) == 0
                if foreign || writableByOthers {
                    throw Violation.unsafeAncestor(path: current, owner: status.owner, mode: status.permissions, of: what)
                }
            }
            if current == "/" { return }
            current = Path.directory(of: current)
        }
    }

    static func octal(_ mode: mode_t) -> String {
        String(mode, radix: 8).leftPadded(to: 4)
    }
}
