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


import Glibc

/// An error of no known layer (none is expected: every layer throws its own type), kept as
/// the cause inside a layer's error rather than flattened into a message or dressed up as a
/// system error with an errno it never had.
public struct UnclassifiedError: CategorizedError {
    public let cause: any Error
    /// What was being done, for the message.
    public let context: String?

    public init(_ cause: any Error, context: String?) {
        self.cause = cause
        self.context = context
    }

    public var kind: FailureKind { .other }
    public var description: String { context.map { "\($0): \(cause)" } ?? "\(cause)" }
}
