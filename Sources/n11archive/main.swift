import ArgumentParser
import Glibc
import N11Crypto
import N11System

// Secrets are about to be held: keep them out of core dumps before anything else runs.
ProcessHardening.disableCoreDumps()
// Before any thread starts: Ctrl-C and SIGTERM clean up what this run made, then end it.
Interruption.install()
/// One write(2) to standard error, its result ignored: the terminal may be gone, and the
/// signal thread holds the interruption lock (no progress-bar state is touched from there).
@Sendable func writeSignalNote(_ text: String) {
    let line = Array("\nn11archive: warning: \(text)\n".utf8)
    _ = line.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
}
@Sendable func signalName(_ signal: Int32) -> String {
    [SIGINT: "Ctrl-C (SIGINT)", SIGTERM: "SIGTERM", SIGHUP: "SIGHUP"][signal] ?? "signal \(signal)"
}
Interruption.didCleanUp = { signal, tookBack, committed in
    if let committed {
        writeSignalNote("interrupted by \(signalName(signal)) after \(committed) was committed: it is complete and stays; only the report was cut short")
    } else {
        writeSignalNote("interrupted by \(signalName(signal))\(tookBack ? "; took back what this run had made" : "")")
    }
}
Interruption.willFinish = { signal, committed in
    writeSignalNote("\(signalName(signal)) came after \(committed) was committed: finishing (it is complete either way; press again to stop at once)")
}
FileLock.willWait = { lock, holder, seconds in
    Console.note("\(holder.map { "process \($0)" } ?? "another process") holds '\(lock)'; waiting up to \(Int(seconds.rounded(.up))) s for it to finish…")
}
LocalTimeZone.pinToZoneFile()

// The one place where a failure becomes an exit code (README's table) and, with --json, the
// one error document on stdout carrying that same code.
_ = Output.started  // the clock for durationSeconds starts now
let arguments = CommandLine.arguments
Output.configure(json: Output.guessJSON(from: arguments), quiet: false)

func fail(code: Int32, message: String, hint: String?) -> Never {
    if Output.json && !Output.jsonPrinted {
        try? Console.json(ErrorDocument(command: Output.commandName(from: arguments), exitCode: code, error: message,
                                        hint: hint, durationSeconds: Output.durationSeconds))
    }
    SpoolFiles.removeAll()
    exit(code)
}

do {
    var command = try N11Archive.parseAsRoot()
    if let chooser = command as? ChoosesOutput { Output.configure(json: chooser.json, quiet: chooser.quiet) }
    // Argon2id takes seconds: shown as a phase of its own wherever progress is shown.
    let forcedProgress = (command as? HasOutputOptions)?.outputOptions.progress ?? false
    if !Output.quiet && (Terminal.isTerminal(2) || forcedProgress) {
        let terminal = Terminal.isTerminal(2)
        Argon2id.observer = { parameters, seconds in ProgressLine.keyDerivation(parameters, seconds: seconds, terminal: terminal) }
    }
    try command.run()
} catch is PartialSuccess {
    SpoolFiles.removeAll()
    exit(ExitCode.partial.rawValue)
} catch let error as CategorizedError {
    Console.error(error.description)
    if let hint = error.hint { Console.hint(hint) }
    fail(code: ExitCode(for: error.kind).rawValue, message: error.description, hint: error.hint)
} catch {
    // --help and --version: ArgumentParser prints them (exit 0). Usage errors: in our own
    // form (`n11archive: error: …`), with a "did you mean" for a mistyped command.
    let code = N11Archive.exitCode(for: error)
    guard code != .success else { N11Archive.exit(withError: error) }
    let (message, hint) = UsageProblem.describe(error, arguments: Array(arguments.dropFirst()))
    Console.error(message)
    Console.hint(hint)
    fail(code: ExitCode.usage.rawValue, message: message, hint: hint)
}
