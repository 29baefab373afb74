import Foundation
import N11System

/// All terminal output goes through here: results on stdout, messages on stderr.
enum Console {
    static func out(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func error(_ message: String) {
        ProgressLine.closeBar()
        FileHandle.standardError.write(Data("n11archive: error: \(message)\n".utf8))
    }

    static func hint(_ message: String) {
        FileHandle.standardError.write(Data("n11archive: hint: \(message)\n".utf8))
    }

    /// Informational messages on stderr; silenced by --quiet.
    static func note(_ message: String) {
        if Output.quiet { return }
        FileHandle.standardError.write(Data("n11archive: \(message)\n".utf8))
    }

    /// Something the user should act on although the command succeeds; survives --quiet
    /// (README says why).
    static func warning(_ message: String) {
        ProgressLine.closeBar()
        FileHandle.standardError.write(Data("n11archive: warning: \(message)\n".utf8))
    }

    /// A command's closing summary on stdout; not with --quiet, nor with --json (the
    /// document says it all).
    static func summary(_ line: String) {
        if Output.quiet || Output.json { return }
        out(line)
    }

    /// The one JSON document of a command (README "JSON output").
    static func json(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        out(String(decoding: try encoder.encode(value), as: UTF8.self))
        Output.jsonPrinted = true
    }

    static func byteCount(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes), unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
    }
}

/// A CLI-level problem the parser cannot see (conflicting inputs, a missing secret source).
struct CLIError: CategorizedError {
    let kind: FailureKind
    let description: String
    let hint: String?

    init(_ kind: FailureKind, _ description: String, hint: String? = nil) {
        self.kind = kind
        self.description = description
        self.hint = hint
    }
}
