import Foundation
import N11System

/// All terminal output goes through here: results on stdout, messages on stderr.
///
/// Every human-readable line is passed through `escapingControlCharacters`: item names,
/// file names and archive paths come from vaults and archives that someone else may have
/// made, and a name holding ESC sequences, a carriage return or a newline could rewrite
/// the terminal or forge a line of our output. `--json` documents are written as they are
/// (JSONEncoder escapes C0 itself), so a program reads every name exactly.
enum Console {
    static func out(_ line: String) {
        ProgressLine.clearBar()
        writeLine(escapingControlCharacters(line), to: FileHandle.standardOutput)
    }

    static func error(_ message: String) {
        ProgressLine.closeBar()
        writeLine("n11archive: error: \(escapingControlCharacters(message))", to: FileHandle.standardError)
    }

    static func hint(_ message: String) {
        writeLine("n11archive: hint: \(escapingControlCharacters(message))", to: FileHandle.standardError)
    }

    /// Informational messages on stderr; silenced by --quiet.
    static func note(_ message: String) {
        if Output.quiet { return }
        writeLine("n11archive: \(escapingControlCharacters(message))", to: FileHandle.standardError)
    }

    /// Something the user should act on although the command succeeds; survives --quiet
    /// (README says why).
    static func warning(_ message: String) {
        ProgressLine.closeBar()
        writeLine("n11archive: warning: \(escapingControlCharacters(message))", to: FileHandle.standardError)
    }

    /// A message that cannot be written (a closed terminal, a full disk behind `2>`) is
    /// dropped: `FileHandle.write(_:)` would trap and end the process before its cleanups.
    private static func writeLine(_ line: String, to handle: FileHandle) {
        try? handle.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Written from the array as it is: `Data(bytes)` copied every MiB the listings flush, a
    /// moment's megabyte more at their peak (issue 34). A failed write drops the rest, as above.
    private static func writeRaw(_ bytes: [UInt8], to handle: FileHandle) {
        guard !bytes.isEmpty else { return }
        try? FileDescriptor(borrowing: handle.fileDescriptor, path: "standard output").write(bytes)
    }

    /// `text` with every C0 control (U+0000–U+001F, newline and tab included), DEL and C1
    /// control (U+0080–U+009F) written as `\xHH`, so that it shows as one line of visible
    /// characters. Everything else, backslashes included, is left as it is.
    static func escapingControlCharacters(_ text: String) -> String {
        func isControl(_ v: UInt32) -> Bool { v < 0x20 || (0x7F...0x9F).contains(v) }
        guard text.unicodeScalars.contains(where: { isControl($0.value) }) else { return text }
        var escaped = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isControl(scalar.value) {
                let hex = String(scalar.value, radix: 16)
                escaped.append(contentsOf: ("\\x" + (hex.count == 1 ? "0" : "") + hex).unicodeScalars)
            } else {
                escaped.append(scalar)
            }
        }
        return String(escaped)
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
        // Not through `out`: a JSON document carries names exactly.
        writeLine(String(decoding: try encoder.encode(value), as: UTF8.self), to: FileHandle.standardOutput)
        Output.jsonPrinted = true
    }

    /// A command's JSON document whose lists of strings are too long to hold as a whole (a
    /// restore of millions of items, issue 34): written member by member in `Console.json`'s
    /// layout (pretty-printed, keys sorted), each list element by element, to stdout in
    /// pieces of about a MiB.
    struct StreamedObject {
        private enum Member {
            case encoded(String)
            /// Elements, each a JSON string to quote or (`encoded`) JSON already.
            case strings(((String) throws -> Void) throws -> Void, encoded: Bool = false)
        }
        private var members: [(key: String, value: Member)] = []

        /// A member of any Encodable value, written as `Console.json` writes it.
        mutating func add(_ key: String, _ value: some Encodable) throws {
            // Nested lines go one level deeper (JSONEncoder indents by two spaces).
            members.append((key, .encoded(Self.indented(try Self.encoder().encode(value), by: 2))))
        }

        /// A list of strings that `strings` hands out one at a time, when the document is written.
        mutating func add(_ key: String, strings: @escaping ((String) throws -> Void) throws -> Void) {
            members.append((key, .strings(strings)))
        }

        /// A list of values that `elements` hands out one at a time, when the document is written.
        mutating func add<Element: Encodable>(_ key: String, elements: @escaping ((Element) throws -> Void) throws -> Void) {
            let encoder = Self.encoder()
            members.append((key, .strings({ body in
                try elements { element in
                    // Already JSON, one level deeper than a member (`write` adds the first indent).
                    try body(Self.indented(try encoder.encode(element), by: 4))
                }
            }, encoded: true)))
        }

        /// `json` with every line but the first and the empty ones moved right by `spaces`.
        /// Byte by byte: a listing indents every element, and splitting a `String` walks its
        /// characters (a fifth of a 100,000-item `vault list --json`).
        static func indented(_ json: Data, by spaces: Int) -> String {
            var out: [UInt8] = []
            out.reserveCapacity(json.count + 16 * spaces)
            var afterNewline = false
            for byte in json {
                if afterNewline && byte != UInt8(ascii: "\n") {
                    out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: spaces))
                }
                out.append(byte)
                afterNewline = byte == UInt8(ascii: "\n")
            }
            return String(decoding: out, as: UTF8.self)
        }

        private static func encoder() -> JSONEncoder {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            encoder.dateEncodingStrategy = .iso8601
            return encoder
        }

        func write() throws {
            var out: [UInt8] = []
            out.reserveCapacity(1 << 20)
            func flush(_ force: Bool = false) {
                guard force || out.count >= 1 << 20 else { return }
                writeRaw(out, to: FileHandle.standardOutput)
                out.removeAll(keepingCapacity: true)
            }
            ProgressLine.clearBar()
            out += Array("{\n".utf8)
            for (n, (key, value)) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                out += Array("  \(Self.quoted(key)) : ".utf8)
                switch value {
                case .encoded(let text): out += Array(text.utf8)
                case let .strings(each, encoded):
                    var first = true
                    out += Array("[".utf8)
                    try each { string in
                        out += Array(((first ? "\n    " : ",\n    ") + (encoded ? string : Self.quoted(string))).utf8)
                        first = false
                        flush()
                    }
                    out += Array((first ? "\n\n  ]" : "\n  ]").utf8)
                }
                out += Array((n == members.count - 1 ? "\n" : ",\n").utf8)
            }
            out += Array("}\n".utf8)
            flush(true)
            Output.jsonPrinted = true
        }

        /// `text` as a JSON string: plain printable ASCII (every item ID) as it is, anything
        /// else through JSONEncoder.
        private static func quoted(_ text: String) -> String {
            if text.utf8.allSatisfy({ (0x20..<0x7F).contains($0) && $0 != 0x22 && $0 != 0x5C }) { return "\"\(text)\"" }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.withoutEscapingSlashes]
            return (try? encoder.encode(text)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
        }
    }

    /// Rows as aligned columns (the first row is the header); the last column, a name, is
    /// not padded. Widths count characters after escaping, as they will show.
    static func table(_ rows: [[String]]) {
        let escaped = rows.map { $0.map(escapingControlCharacters) }
        guard let header = escaped.first else { return }
        var writer = TableWriter(widths: header.indices.map { column in escaped.map { DisplayWidth.of($0[column]) }.max() ?? 0 })
        for row in escaped { writer.write(escapedRow: row) }
        writer.finish()
    }

    /// Writes table rows whose column widths are known beforehand (a listing of millions of
    /// rows measures them as it collects them). Built into one buffer and written in large
    /// pieces: `vault list` of 100,000 items spent most of its time in a write, and an
    /// NSString padding, per line.
    struct TableWriter {
        let widths: [Int]
        private var out: [UInt8] = []

        init(widths: [Int]) {
            self.widths = widths
            out.reserveCapacity(1 << 20)
            ProgressLine.clearBar()
        }

        /// A row whose cells are escaped already (`escapingControlCharacters`).
        mutating func write(escapedRow row: [String]) {
            for (i, cell) in row.enumerated() {
                if i > 0 { out.append(contentsOf: [0x20, 0x20]) }
                out.append(contentsOf: cell.utf8)
                if i < row.count - 1 { out.append(contentsOf: repeatElement(0x20, count: max(0, widths[i] - DisplayWidth.of(cell)))) }
            }
            out.append(0x0A)
            if out.count >= 1 << 20 {
                writeRaw(out, to: FileHandle.standardOutput)
                out.removeAll(keepingCapacity: true)
            }
        }

        mutating func finish() {
            writeRaw(out, to: FileHandle.standardOutput)
            out.removeAll()
        }
    }

    /// Writes lines to stdout as `out` does (escaped), gathered into large writes: `vault
    /// add` of 1,000,000 notes lists as many `added` lines, a write(2) each through `out`.
    struct LineWriter {
        private var out: [UInt8] = []

        init() {
            out.reserveCapacity(1 << 16)
            ProgressLine.clearBar()
        }

        mutating func write(_ line: String) {
            out.append(contentsOf: escapingControlCharacters(line).utf8)
            out.append(0x0A)
            if out.count >= 1 << 16 {
                writeRaw(out, to: FileHandle.standardOutput)
                out.removeAll(keepingCapacity: true)
            }
        }

        mutating func finish() {
            writeRaw(out, to: FileHandle.standardOutput)
            out.removeAll()
        }
    }

    /// "512 B", "2.0 KiB", "1.5 GiB": one decimal, ties to even as `%.1f` rounds.
    static func byteCount(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes), unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        if unit == 0 { return "\(bytes) B" }
        let tenths = Int64((value * 10).rounded(.toNearestOrEven))
        return "\(tenths / 10).\(tenths % 10) \(units[unit])"
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

/// How many terminal columns text takes: East Asian wide and fullwidth characters and emoji
/// take two, combining marks and zero-width characters none, everything else one. (What
/// wcwidth(3) says, without depending on the process's locale, which cron leaves at C.)
enum DisplayWidth {
    static func of(_ text: String) -> Int {
        // Printable ASCII (nearly every cell of a table) is a column a byte: the Unicode
        // property lookups were a quarter of `vault list` of 100,000 items.
        if text.utf8.allSatisfy({ (0x20..<0x7F).contains($0) }) { return text.utf8.count }
        return text.unicodeScalars.reduce(0) { $0 + of($1) }
    }

    static func of(_ scalar: Unicode.Scalar) -> Int {
        let value = scalar.value
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if value == 0x200B || (0xFE00...0xFE0F).contains(value) { return 0 }
        if scalar.properties.isEmojiPresentation { return 2 }
        let wide: [ClosedRange<UInt32>] = [
            0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
            0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6,
            0x1F300...0x1F64F, 0x1F900...0x1F9FF, 0x20000...0x2FFFD, 0x30000...0x3FFFD,
        ]
        return wide.contains { $0.contains(value) } ? 2 : 1
    }

    /// `text` cut to at most `width` columns, ending in "…" when it was cut.
    static func truncated(_ text: String, to width: Int) -> String {
        guard of(text) > width else { return text }
        var out = "", used = 0
        for character in text {
            let w = of(String(character))
            if used + w > width - 1 { break }
            out.append(character)
            used += w
        }
        return out + "…"
    }
}
