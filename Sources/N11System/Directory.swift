import Glibc
internal import CLinux

/// Directory operations the tool needs: create with a mode, list, fsync, remove a file durably.
public enum Directory {
    /// Makes sure `path` is a directory, creating it (and missing parents) with `mode`.
    /// Returns true when it created the last component.
    @discardableResult
    public static func ensure(_ path: String, mode: Glibc.mode_t) throws -> Bool {
        if let status = try FileStatus.of(path, followLinks: true) {
            guard status.kind == .directory else { throw SystemError("not a directory", path: path, errno: ENOTDIR) }
            return false
        }
        let parent = Path.directory(of: path)
        if parent != path { try ensure(parent, mode: 0o755 & mode | 0o700) }
        if mkdir(path, mode) != 0 {
            if Glibc.errno == EEXIST { return false }
            throw SystemError("cannot create directory", path: path)
        }
        _ = chmod(path, mode)   // umask may have narrowed it
        try? sync(parent)
        return true
    }

    /// Names in `path`, without "." and "..", sorted for deterministic output.
    /// `sorted: false` skips sorting for callers that order what they find themselves
    /// (sorting 100,000 names was a tenth of opening a vault that size).
    public static func entries(of path: String, sorted: Bool = true) throws -> [String] {
        guard let dir = opendir(path) else { throw SystemError("cannot list directory", path: path) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return sorted ? names.sorted() : names
    }

    /// fsync on the directory, so a rename or unlink in it survives a power cut.
    public static func sync(_ path: String) throws {
        let fd = try FileDescriptor.openDirectory(path)
        try fd.sync()
    }

    /// Bytes an unprivileged user can still write on the file system holding `path`.
    public static func availableBytes(on path: String) throws -> Int64 {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { throw SystemError("cannot read the free space", path: path) }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// Removes a staging directory of ours and what it holds, never following a link and
    /// never entering a directory of another user (`DirectoryHandle.removePrivateTree`).
    /// Best effort: used to throw away what is no longer wanted.
    @discardableResult
    public static func removePrivateTree(_ path: String) -> Bool {
        guard let parent = try? DirectoryHandle.open(Path.directory(of: path), followingLink: true) else { return false }
        return parent.removePrivateTree(Path.lastComponent(of: path))
    }

    /// Removes a file and makes the removal durable.
    public static func removeFile(_ path: String) throws {
        guard unlink(path) == 0 else { throw SystemError("cannot remove", path: path) }
        try sync(Path.directory(of: path))
    }
}

/// Plain path string helpers (no Foundation, no normalisation surprises).
public enum Path {
    public static func join(_ a: String, _ b: String) -> String {
        if a.isEmpty { return b }
        return a.hasSuffix("/") ? a + b : a + "/" + b
    }

    public static func directory(of path: String) -> String {
        var trimmed = path
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        if slash == trimmed.startIndex { return "/" }
        return String(trimmed[..<slash])
    }

    public static func lastComponent(of path: String) -> String {
        var trimmed = path
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return trimmed }
        return String(trimmed[trimmed.index(after: slash)...])
    }

    /// `path` without trailing slashes ("/" stays). A trailing slash makes the kernel follow
    /// a symbolic link in the last component even with O_NOFOLLOW, so paths that must not be
    /// links are trimmed first.
    public static func withoutTrailingSlashes(_ path: String) -> String {
        var trimmed = path
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        return trimmed
    }

    /// An absolute version of `path` against the current directory.
    public static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        let cwd = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return join(cwd, path)
    }

    /// A short random suffix for temp names; not a secret, just unlikely to collide.
    public static func randomSuffix() -> String {
        var bytes = [UInt8](repeating: 0, count: 6)
        _ = bytes.withUnsafeMutableBytes { getrandom($0.baseAddress, $0.count, 0) }
        return bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
