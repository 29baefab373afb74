import ArgumentParser
import N11System

/// The exit codes of README's table, from sysexits.h where one fits.
extension ExitCode {
    static let partial = ExitCode(3)         // restore --salvage left damaged items out
    static let usage = ExitCode(64)          // EX_USAGE
    static let damaged = ExitCode(65)        // EX_DATAERR: failed authentication, malformed
    static let missingInput = ExitCode(66)   // EX_NOINPUT: no such file, item or archive
    static let outputExists = ExitCode(73)   // EX_CANTCREAT: refusing to replace
    static let ioFailure = ExitCode(74)      // EX_IOERR: disk full, read-only, unwritable
    static let busy = ExitCode(75)           // EX_TEMPFAIL: another process holds the lock
    static let authentication = ExitCode(77) // EX_NOPERM: wrong password/PIN, key not here
    static let configuration = ExitCode(78)  // EX_CONFIG: not initialised, unsafe permissions

    init(for kind: FailureKind) {
        switch kind {
        case .usage: self = .usage
        case .damaged: self = .damaged
        case .missingInput: self = .missingInput
        case .outputExists: self = .outputExists
        case .ioFailure: self = .ioFailure
        case .busy: self = .busy
        case .authentication: self = .authentication
        case .configuration: self = .configuration
        case .other: self = .failure
        }
    }
}

/// Thrown after a command printed its report of a partial success (`restore --salvage` that
/// left damaged items out): the report said everything, so only the exit code remains.
struct PartialSuccess: Error {}
