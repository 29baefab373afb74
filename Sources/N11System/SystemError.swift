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
}
