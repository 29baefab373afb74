import N11System

/// The container layer's one error type: the ZIP file as a file.
public enum ContainerError: Error, CustomStringConvertible, Sendable {
    /// libzip could not open or parse the file (not a ZIP, truncated, inconsistent), for `cause`.
    case unreadable(path: String, cause: ReadFailure)
    /// An entry is of a kind the format never writes (compressed, encrypted, a link, a directory).
    case forbiddenEntry(name: String, reason: String)
    /// Writing the archive failed, for `cause`.
    case writeFailed(path: String, cause: WriteFailure)
    case entryReadFailed(name: String, cause: ReadFailure)

    public var description: String {
        switch self {
        case .unreadable(let path, let cause): return "cannot read '\(path)' as a ZIP archive: \(cause)"
        case .forbiddenEntry(let name, let reason): return "entry '\(name)' is \(reason), which an n11archive archive never contains"
        case .writeFailed(let path, let cause): return "cannot write '\(path)': \(cause)"
        case .entryReadFailed(let name, let cause): return "cannot read entry '\(name)': \(cause)"
        }
    }
}

extension ContainerError: CategorizedError {
    public var kind: FailureKind {
        switch self {
        case .unreadable(_, .system(let error)), .entryReadFailed(_, .system(let error)): return error.kind
        case .unreadable, .forbiddenEntry, .entryReadFailed: return .damaged
        case .writeFailed(_, .system(let error)): return error.kind
        case .writeFailed(_, .libzip(_, let errno, _)) where errno != 0: return SystemError("", errno: errno).kind
        case .writeFailed: return .ioFailure
        }
    }

    /// A write that failed for a system reason says what to do about it (free space, a
    /// read-only file system), as the system error would.
    public var hint: String? {
        switch self {
        case .writeFailed(_, .system(let error)): return error.hint
        case .writeFailed(_, .libzip(_, let errno, _)) where errno != 0: return SystemError("", errno: errno).hint
        default: return nil
        }
    }
}

/// Why writing a ZIP failed, kept as a value: the system error of creating the file,
/// libzip's own error (its code, and the errno behind it when there is one), or an entry
/// whose source gave more or fewer bytes than it declared.
public enum WriteFailure: Error, CustomStringConvertible, Sendable, Equatable {
    case system(SystemError)
    /// `zip_error_code_zip`, `zip_error_code_system` (0 when none) and libzip's message.
    case libzip(code: Int32, errno: Int32, message: String)
    case alreadyFinished
    case entryShort(produced: Int64, declared: Int64)
    case entryLong(declared: Int64)

    public var description: String {
        switch self {
        case .system(let error): return error.description
        case .libzip(_, _, let message): return message
        case .alreadyFinished: return "already finished"
        case let .entryShort(produced, declared): return "the entry ended after \(produced) of \(declared) bytes"
        case .entryLong(let declared): return "the entry is longer than its declared \(declared) bytes"
        }
    }
}

/// Why reading a ZIP or one of its entries failed, kept as a value.
public enum ReadFailure: Error, CustomStringConvertible, Sendable, Equatable {
    /// libzip's error: its code, the errno behind it (0 when none), its message.
    case libzip(code: Int32, errno: Int32, message: String)
    case system(SystemError)
    /// The file ends inside the entry (a salvage's read without libzip).
    case endsInsideEntry
    /// The entry's CRC-32 is not the one its header records.
    case crcMismatch
    /// The entry gave another number of bytes than its size.
    case wrongLength

    public var description: String {
        switch self {
        case .libzip(_, _, let message): return message
        case .system(let error): return error.description
        case .endsInsideEntry: return "the file ends inside it"
        case .crcMismatch: return "CRC error"
        case .wrongLength: return "wrong length"
        }
    }
}
