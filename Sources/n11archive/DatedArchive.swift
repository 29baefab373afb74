import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11Vault

/// Dated names for `create --output-dir` (see ArchiveRetention.fileName).
enum DatedArchive {
    /// The directory, which must exist: a mistyped path in a timer unit should fail, not
    /// quietly start a new backup directory. The message says which role it has (create
    /// writes to it, prune deletes from it) and whether it is missing or not a directory.
    static func existingDirectory(_ directory: String, forPrune: Bool = false) throws -> String {
        let status = (try? FileStatus.of(directory, followLinks: true)) ?? nil
        if status?.kind == .directory { return directory }
        let role = forPrune ? "the archive directory" : "the output directory"
        let consequence = forPrune ? "nothing was deleted" : "nothing was written"
        if status == nil {
            throw CLIError(.missingInput, "\(role) '\(directory)' does not exist; \(consequence)",
                           hint: forPrune ? "give the directory that `create --output-dir` writes to"
                                          : "create it first (mkdir -p '\(directory)'), or fix the path")
        }
        throw CLIError(.missingInput, "\(role) '\(directory)' is not a directory; \(consequence)",
                       hint: forPrune ? "give the directory that `create --output-dir` writes to, not a file in it"
                                      : "give a directory (the archive's name is chosen for you), or use -o FILE")
    }

    /// The first free name for `date`: the bare timestamp, then -2, -3, …. A name taken
    /// between this check and the publish is still never overwritten (create refuses, 73).
    static func freePath(in directory: String, at date: Date) throws -> String {
        for attempt in 1...1000 {
            let candidate = Path.join(directory, ArchiveRetention.fileName(for: date, attempt: attempt))
            if (try FileStatus.of(candidate)) == nil { return candidate }
        }
        throw CLIError(.outputExists, "1000 archives named for \(ArchiveRetention.fileName(for: date)) already exist in '\(directory)'; nothing was written",
                       hint: "prune the directory or write somewhere else")
    }
}
