import Foundation
import N11System

/// All terminal output goes through here: results on stdout, messages on stderr.
enum Console {
    static func out(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func error(_ message: String) {
        FileHandle.standardError.write(Data("n11archive: error: \(message)\n".utf8))
    }

    static func hint(_ message: String) {
        FileHandle.standardError.write(Data("n11archive: hint: \(message)\n".utf8))
    }

    static func note(_ message: String) {
        FileHandle.standardError.write(Data("n11archive: \(message)\n".utf8))
    }

    static func json(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        out(String(decoding: try encoder.encode(value), as: UTF8.self))
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
