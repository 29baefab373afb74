internal import CLinux
import Glibc

/// An open directory, never reached through a symbolic link, through which names are looked
/// up, created, renamed and removed relative to it (the *at calls). A directory the user
/// writes into may be shared with other users: once it is open, swapping it or one of its
/// parents for a link changes nothing about where our files go, and no call here follows a
/// link in the last component.
public final class DirectoryHandle: @unchecked Sendable {
    public let path: String
    let descriptor: FileDescriptor

    private init(path: String, descriptor: FileDescriptor) {
        self.path = path
        self.descriptor = descriptor
    }

    /// How a rename treats an existing target (renameat2 flags).
    public enum RenameMode: UInt32, Sendable {
        /// Replace whatever is at the target, as rename(2).
        case replace = 0
        /// Fail with EEXIST if the target exists, checked by the kernel at the moment of the rename.
        case noReplace = 1
        /// Swap source and target (both must exist), so a replaced file can be put back.
        case exchange = 2
    }

    /// Opens `path` as a directory; a symbolic link in its last component is refused
    /// (ELOOP), whatever it points to, unless `followingLink` (a path the user named and
    /// that only they control, such as a vault that lives behind a link).
    public static func open(_ path: String, followingLink: Bool = false) throws -> DirectoryHandle {
        let fd = Glibc.open(path, O_RDONLY | O_DIRECTORY | (followingLink ? 0 : O_NOFOLLOW) | O_CLOEXEC)
        guard fd >= 0 else { throw openError(path) }
        return DirectoryHandle(path: path, descriptor: FileDescriptor(adopting: fd, path: path))
    }

    /// Opens the subdirectory `name` of this one, refusing a link in its place.
    public func openSubdirectory(_ name: String) throws -> DirectoryHandle {
        let full = Path.join(path, name)
        let fd = openat(descriptor.rawValue, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw Self.openError(full) }
        return DirectoryHandle(path: full, descriptor: FileDescriptor(adopting: fd, path: full))
    }

    /// ELOOP here means a link stood where a directory was expected (SystemError's hint says
    /// so); ENOTDIR a file.
    private static func openError(_ path: String) -> SystemError {
        SystemError("cannot open directory", path: path)
    }

    /// The directory's own status, from the open descriptor (not the path).
    public func status() throws -> FileStatus { try descriptor.status() }

    /// Refuses a directory that belongs to another user: they could replace what we put there.
    public func requireOwnedByUser() throws {
        let owner = try status().owner
        guard owner == geteuid() else { throw PrivatePermissions.Violation.wrongOwner(path: path, owner: owner) }
    }

    /// The status of `name` in this directory, not following a link; nil if nothing is
    /// there. Any other failure (EACCES, ENOTDIR, EIO, …) throws: "cannot tell" is never
    /// taken for "free".
    public func status(of name: String) throws -> FileStatus? {
        var st = stat()
        if fstatat(descriptor.rawValue, name, &st, AT_SYMLINK_NOFOLLOW) == 0 { return FileStatus(st) }
        if Glibc.errno == ENOENT { return nil }
        throw SystemError("cannot stat", path: Path.join(path, name))
    }

    /// Names in this directory, without "." and "..", in no particular order; only those
    /// `include` takes, where it is given. A vault's `Notes/` may hold millions of names:
    /// callers that want a few of them filter here rather than hold them all (issue 34).
    public func entries(where include: (String) -> Bool = { _ in true }) throws -> [String] {
        var names: [String] = []
        try forEachEntry { name in if include(name) { names.append(name) } }
        return names
    }

    /// Calls `body` with each name in this directory but "." and "..", in no particular
    /// order, holding none of them. `body` may remove the name it was handed: POSIX leaves
    /// unspecified only whether a name removed or added during the walk is itself returned.
    public func forEachEntry(_ body: (String) throws -> Void) throws {
        try forEachEntryAndInode { name, _ in try body(name) }
    }

    /// `forEachEntry` with each entry's inode number as the directory gives it (`d_ino`,
    /// read without touching the inode): the order to read many small files in, since a
    /// file system lays out inodes and their blocks in the order files were made.
    public func forEachEntryAndInode(_ body: (String, UInt64) throws -> Void) throws {
        let copy = dup(descriptor.rawValue)
        guard copy >= 0, let dir = fdopendir(copy) else {
            if copy >= 0 { Glibc.close(copy) }
            throw SystemError("cannot list directory", path: path)
        }
        defer { closedir(dir) }
        rewinddir(dir)
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { try body(name, UInt64(entry.pointee.d_ino)) }
        }
    }

    /// Creates the subdirectory `name` with exactly `mode` (the umask may only narrow it).
    public func makeSubdirectory(_ name: String, mode: Glibc.mode_t) throws {
        guard mkdirat(descriptor.rawValue, name, mode) == 0 else { throw SystemError("cannot create directory", path: Path.join(path, name)) }
    }

    /// Creates a new file `name` that must not exist yet, never following a link.
    public func createFile(_ name: String, mode: Glibc.mode_t) throws -> FileDescriptor {
        let full = Path.join(path, name)
        let fd = openat(descriptor.rawValue, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw SystemError("cannot create", path: full) }
        return FileDescriptor(adopting: fd, path: full)
    }

    /// Opens the existing regular file `name` for reading, refusing a link in its place.
    public func openFileForReading(_ name: String) throws -> FileDescriptor {
        let full = Path.join(path, name)
        let fd = openat(descriptor.rawValue, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError("cannot open", path: full) }
        return FileDescriptor(adopting: fd, path: full)
    }

    /// Removes the entry `name` (a file or a link: the link itself, never what it points to).
    public func removeFile(_ name: String) throws {
        guard unlinkat(descriptor.rawValue, name, 0) == 0 else { throw SystemError("cannot remove", path: Path.join(path, name)) }
    }

    /// Removes the empty subdirectory `name`; fails (ENOTEMPTY) if anything is in it.
    public func removeEmptySubdirectory(_ name: String) throws {
        guard unlinkat(descriptor.rawValue, name, AT_REMOVEDIR) == 0 else {
            throw SystemError("cannot remove directory", path: Path.join(path, name))
        }
    }

    /// Renames `name` in `source` to `newName` in `target` (same file system) with renameat2.
    public static func rename(_ name: String, in source: DirectoryHandle, to newName: String, in target: DirectoryHandle,
                              _ mode: RenameMode) throws {
        guard n11_renameat2(source.descriptor.rawValue, name, target.descriptor.rawValue, newName, mode.rawValue) == 0 else {
            throw SystemError("cannot move into place", path: Path.join(target.path, newName))
        }
    }

    /// fsync on the directory, so the renames and removals in it survive a power cut.
    public func sync() throws { try descriptor.sync() }

    /// Removes a private tree that a killed run of ours left (a staging directory): only a
    /// real directory owned by this user, opened without following links, its files and
    /// subdirectories removed through that descriptor. A link, a file or a directory of
    /// another user in its place is left alone (returns false): someone may have planted it
    /// so that we would delete through it. Best effort: what cannot be removed stays.
    @discardableResult
    public func removePrivateTree(_ name: String) -> Bool {
        guard let status = try? status(of: name), status.kind == .directory, status.owner == geteuid(),
              let tree = try? openSubdirectory(name), (try? tree.status().owner) == geteuid() else { return false }
        // Removed as listed, no list kept (an export's staging may hold millions of files),
        // then listed again for what remains; a pass that removes nothing ends it: what is
        // left cannot be removed.
        while true {
            var removedAny = false, remaining = false
            _ = try? tree.forEachEntry { entry in
                let removed = (try? tree.status(of: entry))?.kind == .directory
                    ? tree.removePrivateTree(entry) : (try? tree.removeFile(entry)) != nil
                if removed { removedAny = true } else { remaining = true }
            }
            if !remaining || !removedAny { break }
        }
        return (try? removeEmptySubdirectory(name)) != nil
    }
}
