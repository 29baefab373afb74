import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11System

/// How much a command says, for the commands that do long work (create, verify, restore,
/// prune): `--json` (one document on stdout), `--quiet` (errors and warnings only),
/// `--progress` (progress lines even when stderr is not a terminal).
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print one JSON document on stdout (also on failure); see README \"JSON output\".")
    var json = false

    @Flag(name: [.short, .long], help: "Print only errors and warnings: no progress, no summary, no notes.")
    var quiet = false

    @Flag(help: "Show progress even when stderr is not a terminal (plain lines, at most one a second).")
    var progress = false

    func validate() throws {
        if quiet && progress { throw ValidationError("--quiet and --progress exclude each other") }
    }

    /// The observer for this run's pipeline, or nil when nothing is to be shown.
    /// On a terminal: a bar redrawn at most 10 times a second. Otherwise only with
    /// --progress: a plain line at most once a second and one at the end.
    func observer(_ verb: String) -> ArchiveProgress? {
        ProgressLine.observer(verb, quiet: quiet, forced: progress)
    }
}

/// A command with --json (and perhaps --quiet): main.swift sets the process-wide output mode
/// from it once the command line has parsed, before the command runs.
protocol ChoosesOutput {
    var json: Bool { get }
    var quiet: Bool { get }
}

extension ChoosesOutput {
    var quiet: Bool { false }
}

/// The commands that do long work share `OutputOptions`.
protocol HasOutputOptions: ChoosesOutput {
    var outputOptions: OutputOptions { get }
}

extension HasOutputOptions {
    var json: Bool { outputOptions.json }
    var quiet: Bool { outputOptions.quiet }
}

/// The process-wide output mode, set once the command line has parsed (before any output)
/// and read by Console and the error path in main.swift. Single-threaded CLI.
enum Output {
    nonisolated(unsafe) private(set) static var json = false
    nonisolated(unsafe) private(set) static var quiet = false
    /// Set when the JSON document went out, so the error path never prints a second one.
    nonisolated(unsafe) static var jsonPrinted = false
    static let started = Date()

    static func configure(json: Bool, quiet: Bool) {
        if json { self.json = true }
        if quiet { self.quiet = true }
    }

    /// Where listings spool their sorted runs (sealed, unnamed: `SpoolFile`): $TMPDIR, else /tmp.
    static var spoolDirectory: String {
        let asked = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 }
        // A TMPDIR that is no directory (unset by a cron job's environment, say) is no reason to fail.
        if let asked, ((try? FileStatus.of(asked, followLinks: true)) ?? nil)?.kind == .directory { return asked }
        return "/tmp"
    }

    /// Rows a listing sorts in memory before it spools a run: 32,768, or N11_SORT_RUN_ROWS (at
    /// least 2), which tests set low to take the spooled path with a few items.
    static var sortRunRows: Int {
        ProcessInfo.processInfo.environment["N11_SORT_RUN_ROWS"].flatMap(Int.init).map { max(2, $0) } ?? 32_768
    }

    /// One item in this many ends a manifest page (FORMAT.md §10.9: 4,096): N11_PAGE_AVERAGE
    /// (a power of two, at least 2), which Scripts/make-incremental-fixtures sets low to make
    /// small archives of many pages. Anything else is ignored.
    static var pageAverage: UInt64? {
        ProcessInfo.processInfo.environment["N11_PAGE_AVERAGE"].flatMap { UInt64($0) }.flatMap { $0 >= 2 && $0 & ($0 - 1) == 0 ? $0 : nil }
    }

    static var durationSeconds: Double { (max(0, Date().timeIntervalSince(started)) * 1000).rounded() / 1000 }

    /// Before parsing: does the command line ask for JSON? So that a usage error (which
    /// happens before any option is set) still comes out as a JSON document.
    static func guessJSON(from arguments: [String]) -> Bool {
        arguments.dropFirst().prefix(while: { $0 != "--" }).contains("--json")
    }

    /// The command's name for documents ("create", "vault list", "password generate"), from
    /// the command line (the two command groups name their subcommand too).
    static func commandName(from arguments: [String]) -> String {
        let words = Array(arguments.dropFirst().prefix(while: { !$0.hasPrefix("-") }).prefix(2))
        guard let first = words.first else { return "" }
        if ["vault", "password"].contains(first), words.count > 1 { return first + " " + words[1] }
        return first
    }
}

/// Progress text: `[####....] 1,234/20,256 items  512.0 MiB/1.0 GiB  180.0 MiB/s  ETA 0:04`.
enum ProgressLine {
    static func text(_ s: ArchiveProgress.Snapshot, barWidth: Int?) -> String {
        var parts: [String] = []
        if let barWidth {
            let fraction = s.totalBytes > 0 ? Double(s.bytes) / Double(s.totalBytes)
                                            : (s.totalItems > 0 ? Double(s.items) / Double(s.totalItems) : 1)
            let filled = min(barWidth, Int(fraction * Double(barWidth)))
            parts.append("[" + String(repeating: "#", count: filled) + String(repeating: ".", count: barWidth - filled) + "]")
        }
        parts.append("\(grouped(s.items))/\(grouped(s.totalItems)) items")
        parts.append("\(Console.byteCount(s.bytes))/\(Console.byteCount(s.totalBytes))")
        let rate = s.rate
        parts.append("\(Console.byteCount(Int64(rate)))/s")
        if s.finished {
            parts.append("in \(clock(s.elapsed))")
        } else if rate > 0 {
            parts.append("ETA \(clock(Double(s.totalBytes - s.bytes) / rate))")
        } else {
            parts.append("ETA -:--")
        }
        return parts.joined(separator: "  ")
    }

    /// The observer for a run (see `OutputOptions.observer`), for commands without
    /// `OutputOptions` too (`vault add`).
    static func observer(_ verb: String, quiet: Bool, forced: Bool) -> ArchiveProgress? {
        if quiet { return nil }
        let progress: ArchiveProgress
        let drawer = Drawer()
        if Terminal.isTerminal(2) {
            progress = ArchiveProgress(interval: 0.1) { drawBar($0, verb: verb); lastDrawn = drawer.progress }
        } else {
            guard forced else { return nil }
            progress = ArchiveProgress(interval: 1.0) { printPlain($0, verb: verb); lastDrawn = drawer.progress }
        }
        drawer.progress = progress
        return progress
    }

    /// Lets an observer's report name the observer (weakly: no cycle through its closure).
    private final class Drawer: @unchecked Sendable {   // set once, before any report
        weak var progress: ArchiveProgress?
    }

    /// The observer that drew the last line, not the one made last: `create -o remote:…`
    /// makes its upload's observer first, and a failed upload redrew the finished create.
    /// Held here, since the error is shown after the command has let go of it.
    nonisolated(unsafe) private static var lastDrawn: ArchiveProgress?
    /// Whether the last line drawn was not its observer's final one: a run that fails shows
    /// where it got to (`showWhereItStopped`) before the error.
    nonisolated(unsafe) private static var latestUnfinished = false

    /// Before an error ends the run: the last progress line, throttled, may be behind by up
    /// to its interval; it is drawn again with the counts at the failure.
    static func showWhereItStopped() {
        guard latestUnfinished, let progress = lastDrawn else { return }
        latestUnfinished = false
        progress.reportWhereItStopped()
    }

    /// True while a bar is on screen without its final newline (a failure mid-run).
    nonisolated(unsafe) static var barOpen = false

    /// Wipes an open bar off its line so that a line of output can take it; the next
    /// report draws the bar again below.
    static func clearBar() {
        if barOpen { write("\r\u{1B}[K") }
    }

    /// One line redrawn in place (\r, erase to end of line); a newline after the last.
    /// It never wraps: the terminal's width is read at each redraw, so a resize applies at
    /// once (see `fitted`).
    static func drawBar(_ s: ArchiveProgress.Snapshot, verb: String) {
        let line = fitted(s, verb: verb, columns: Terminal.columns(2) ?? 80)
        write("\r\(line)\u{1B}[K\(s.finished ? "\n" : "")")
        barOpen = !s.finished
        latestUnfinished = !s.finished
    }

    /// The progress line within `columns - 1` characters (a line that fills the last column
    /// wraps on some terminals): the bar shrinks first, then the rate and the ETA go, then
    /// the byte counts, and as a last resort the text is cut.
    static func fitted(_ s: ArchiveProgress.Snapshot, verb: String, columns: Int) -> String {
        let room = max(10, columns - 1)
        // items, bytes, rate, then the ETA (or the time taken)
        let full = text(s, barWidth: nil).components(separatedBy: "  ")
        let variants: [[String]] = [full, Array(full.prefix(2)) + full.suffix(1), Array(full.prefix(2)), Array(full.prefix(1))]
        for parts in variants {
            let words = parts.joined(separator: "  ")
            // "verb [bar]  words": the bar takes what is left, 10 to 24 marks.
            let spare = room - verb.count - 1 - words.count - 2 - 2
            if spare >= 10 { return "\(verb) " + bar(s, width: min(24, spare)) + "  " + words }
            if verb.count + 1 + words.count <= room { return "\(verb) " + words }
        }
        return String("\(verb) \(full[0])".prefix(room))
    }

    private static func bar(_ s: ArchiveProgress.Snapshot, width: Int) -> String {
        let fraction = s.totalBytes > 0 ? Double(s.bytes) / Double(s.totalBytes)
                                        : (s.totalItems > 0 ? Double(s.items) / Double(s.totalItems) : 1)
        let filled = min(width, Int(fraction * Double(width)))
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "]"
    }

    /// Argon2id, as a phase of its own: on a terminal a line that the bar then replaces, with
    /// `--progress` a plain line; its time once it is done.
    static func keyDerivation(_ parameters: Argon2Parameters, seconds: Double?, terminal: Bool) {
        let what = "deriving the key (Argon2id, \(parameters.memoryBytes >> 20) MiB, \(parameters.opsLimit) pass\(parameters.opsLimit == 1 ? "" : "es"))"
        if terminal {
            let line = seconds.map { what + String(format: ": %.1f s", $0) } ?? what + "…"
            write("\r" + String(line.prefix(max(10, (Terminal.columns(2) ?? 80) - 1))) + "\u{1B}[K")
            barOpen = true
            latestUnfinished = false
        } else if let seconds {
            write("n11archive: " + what + String(format: ": %.1f s\n", seconds))
        }
    }

    /// Ends an unfinished bar's line, so an error message starts on a line of its own.
    static func closeBar() {
        if barOpen { write("\n"); barOpen = false }
    }

    /// A log-friendly line (cron, CI): no control characters.
    static func printPlain(_ s: ArchiveProgress.Snapshot, verb: String) {
        write("n11archive: \(verb) \(text(s, barWidth: nil))\n")
        latestUnfinished = !s.finished
    }

    private static func write(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// 1234567 → "1,234,567".
    static func grouped(_ n: Int) -> String {
        let digits = Array(String(n))
        var out = ""
        for (i, d) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(d)
        }
        return out
    }

    /// Seconds as m:ss, or h:mm:ss past an hour.
    static func clock(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "-:--" }
        let total = Int(seconds.rounded())
        let h = total / 3600, m = (total % 3600) / 60, sec = total % 60
        return h > 0 ? String(format: "%d:%02d:%02d", h, m, sec) : String(format: "%d:%02d", m, sec)
    }
}

/// What every JSON document carries (README "JSON output"); commands add their fields.
struct ErrorDocument: Encodable {
    let outcome = "error"
    let command: String
    let exitCode: Int32
    let error: String
    let hint: String?
    let durationSeconds: Double
}
