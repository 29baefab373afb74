/// What kind of failure an error is, independent of the layer that raised it. The CLI maps
/// each kind to one documented exit code, so cron and CI can tell failures apart.
public enum FailureKind: Sendable, Equatable {
    case usage            // the command line itself is wrong
    case damaged          // data failed authentication or does not parse: damaged or tampered
    case missingInput     // a named file, item or archive does not exist
    case outputExists     // refusing to replace something that exists
    case ioFailure        // disk full, read-only file system, permission denied on a write
    case busy             // another n11archive holds the lock
    case authentication   // wrong password or PIN, or the needed key is not here
    case configuration    // key store missing, or its permissions are unsafe
    case other
}

/// Errors that know their kind; every layer's error enum conforms.
public protocol CategorizedError: Error, CustomStringConvertible {
    var kind: FailureKind { get }
    /// What the user can do about it, when there is something useful to say.
    var hint: String? { get }
}

extension CategorizedError {
    public var hint: String? { nil }
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

import Glibc
