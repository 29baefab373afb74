import ArgumentParser
import Foundation
import N11Crypto
import N11System

// Secrets are about to be held: keep them out of core dumps before anything else runs.
ProcessHardening.disableCoreDumps()
// Large arrays mapped and unmapped on their own: memory that does not grow with a long run.
Heap.fixLargeAllocationThreshold()
// Before any thread starts: Ctrl-C and SIGTERM clean up what this run made, then end it.
Interruption.install()
/// A note from the signal thread (see `Interruption.writeToStandardError`).
@Sendable func writeSignalNote(_ text: String) {
    Interruption.writeToStandardError("\nn11archive: warning: \(text)\n")
}
Interruption.didCleanUp = { signal, tookBack, committed in
    let name = Interruption.name(of: signal)
    if let committed {
        writeSignalNote("interrupted by \(name) after \(committed) was committed: it is complete and stays; only the report was cut short")
    } else {
        writeSignalNote("interrupted by \(name)\(tookBack ? "; took back what this run had made" : "")")
    }
}
Interruption.willFinish = { signal, committed in
    writeSignalNote("\(Interruption.name(of: signal)) came after \(committed) was committed: finishing (it is complete either way; press again to stop at once)")
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
    ProgressLine.showWhereItStopped()
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
