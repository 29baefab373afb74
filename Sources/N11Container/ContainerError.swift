import N11System

/// The container layer's one error type: the ZIP file as a file.
public enum ContainerError: Error, CustomStringConvertible, Sendable {
    /// libzip could not open or parse the file (not a ZIP, truncated, inconsistent).
    case unreadable(path: String, reason: String)
    /// An entry is of a kind the format never writes (compressed, encrypted, a link, a directory).
    case forbiddenEntry(name: String, reason: String)
    /// Writing the archive failed; `cause` is the error of the entry source if one failed.
    case writeFailed(path: String, reason: String)
    case entryReadFailed(name: String, reason: String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): return "cannot read '\(path)' as a ZIP archive: \(reason)"
        case .forbiddenEntry(let name, let reason): return "entry '\(name)' is \(reason), which an n11archive archive never contains"
        case .writeFailed(let path, let reason): return "cannot write '\(path)': \(reason)"
        case .entryReadFailed(let name, let reason): return "cannot read entry '\(name)': \(reason)"
        }
    }
}

extension ContainerError: CategorizedError {
    public var kind: FailureKind {
        switch self {
        case .unreadable, .forbiddenEntry, .entryReadFailed: return .damaged
        case .writeFailed: return .ioFailure
        }
    }
}
