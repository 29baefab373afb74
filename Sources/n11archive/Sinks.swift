import N11Crypto
import N11System

/// Stages plaintext in an AtomicFile's temp file; the caller commits it only after the
/// read returned, i.e. after the tag verified. Plaintext on disk only because the user asked
/// for an export (`vault cat -o`).
final class StagedFileSink: UnverifiedPlaintextSink {
    private let file: AtomicFile
    init(_ file: AtomicFile) { self.file = file }
    func stage(_ bytes: ArraySlice<UInt8>) throws { try file.descriptor.write(bytes) }
}

/// stdout, used only for a second pass after a first pass verified the whole item.
final class StandardOutputSink: UnverifiedPlaintextSink {
    private let out = FileDescriptor(borrowing: 1, path: "stdout")
    func stage(_ bytes: ArraySlice<UInt8>) throws { try out.write(bytes) }

    /// Binary bytes on a terminal garble it (and may drive its escape sequences): refused
    /// unless `force`, before anything is read, as gzip and age refuse.
    /// `alternatives` says what else the command takes (its own flags, not another's).
    static func refuseBinaryOnTerminal(_ binary: Bool, force: Bool, what: String,
                                       alternatives: String = "give -o FILE, or pass --force") throws {
        guard binary && !force && Terminal.isTerminal(1) else { return }
        throw CLIError(.usage, "standard output is a terminal; \(what) is binary and was not written",
                       hint: "redirect it (> FILE), or \(alternatives)")
    }
}

/// Where `-o` writes: FILE as given, or for `DIR/` (or an existing directory) the stored
/// name inside DIR. A stored name is a label from a vault or archive, so "." and "..", and
/// names of n11archive's own temp files, become the item's ID.
enum OutputPath {
    static func resolve(_ output: String, storedName: String, id: String) throws -> String {
        let isDirectory = output.hasSuffix("/") || ((try? FileStatus.of(output, followLinks: true))??.kind == .directory)
        guard isDirectory else { return output }
        let safe = (storedName == "." || storedName == ".." || storedName.hasPrefix(".n11") || storedName.contains("/")) ? id : storedName
        return Path.join(Path.withoutTrailingSlashes(output), safe)
    }

    /// Refuses an output whose folder is missing, or is no folder, before anything is read:
    /// the system's "cannot create: No such file or directory" did not say which part is
    /// missing or that nothing is created for you.
    static func requireFolder(of path: String) throws {
        let folder = Path.directory(of: Path.absolute(path))
        // Only a missing folder is "missing": a folder that cannot be searched, or a file
        // above it, keeps the system's own words (and exit code).
        let status = try FileStatus.of(folder, followLinks: true)
        switch status?.kind {
        case .directory?: return
        case nil:
            throw CLIError(.missingInput, "the folder '\(folder)' does not exist; nothing was written",
                           hint: "create it first (mkdir -p '\(folder.replacingOccurrences(of: "'", with: "'\\''"))'), or give an existing folder")
        default:
            throw CLIError(.missingInput, "'\(folder)' is not a folder; nothing was written", hint: "give -o a path in a folder")
        }
    }
}

