import Glibc

/// A failed system call: what was attempted, on which path, and the errno it gave.
/// The one error type of the POSIX layer; higher layers translate it into their own.
public struct SystemError: Error, CustomStringConvertible, Sendable, Equatable {
    public let operation: String
    public let path: String?
    public let errno: Int32

    public init(_ operation: String, path: String? = nil, errno: Int32 = Glibc.errno) {
        self.operation = operation
        self.path = path
        self.errno = errno
    }

    public var reason: String { String(cString: strerror(errno)) }

    public var description: String {
        let why = errno == 0 ? "" : ": \(reason)"
        if let path { return "\(operation) '\(path)'\(why)" }
        return "\(operation)\(why)"
    }

    /// The disk or quota is full: callers report these distinctly so cron mail says what to fix.
    public var isOutOfSpace: Bool { errno == ENOSPC || errno == EDQUOT }
    public var isPermissionDenied: Bool { errno == EACCES || errno == EPERM || errno == EROFS }
    public var isNotFound: Bool { errno == ENOENT || errno == ENOTDIR }
    /// Something is already at the path (a create or publish that must not replace).
    public var isAlreadyExisting: Bool { errno == EEXIST }
    /// More than a bounded read takes (`FileDescriptor.readAll(limit:)`).
    public var isTooLarge: Bool { errno == EFBIG }
}

extension SystemError: CategorizedError {
    public var kind: FailureKind {
        if isNotFound { return .missingInput }
        return .ioFailure
    }
    public var hint: String? {
        if isOutOfSpace { return "free some space on that file system, or write somewhere else" }
        if errno == EROFS { return "the file system is read-only; choose a writable place" }
        if isPermissionDenied { return "check the permissions of that path" }
        if errno == ELOOP {
            return "a symbolic link stands where n11archive expects a directory or file of its own; it never writes or deletes through links it did not create: give the real path, or remove the link"
        }
        return nil
    }
}
