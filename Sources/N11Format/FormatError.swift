import N11System

/// The format layer's one error type: what in the archive's structure is wrong.
/// Every case means the archive is damaged, hostile or not one of ours.
public enum FormatError: Error, CustomStringConvertible, Sendable, Equatable {
    case notAnArchive(String)
    case unsupportedVersion(Int)
    case invalidHeader(String)
    case invalidManifest(String)
    case invalidEntryName(String)
    case limitExceeded(String)
    /// A key file (PEM, recipients list) that is not what it should be.
    case invalidKeyFile(String)
    /// A Ciphio text message that does not parse.
    case invalidMessage(String)

    public var description: String {
        switch self {
        case .notAnArchive(let why): return "not an n11archive archive (\(why))"
        case .unsupportedVersion(let v): return "archive format version \(v) is not supported by this n11archive (it reads versions 1, 2 and 3)"
        case .invalidHeader(let why): return "invalid archive header: \(why)"
        case .invalidManifest(let why): return "invalid manifest: \(why)"
        case .invalidEntryName(let name): return "invalid entry name '\(name.debugDescription.dropFirst().dropLast())'"
        case .limitExceeded(let what): return "archive exceeds a limit: \(what)"
        case .invalidKeyFile(let why): return why
        case .invalidMessage(let why): return "not a Ciphio message: \(why)"
        }
    }
}

extension FormatError: CategorizedError {
    /// Every case is a damaged, hostile or foreign archive.
    public var kind: FailureKind { .damaged }
}
