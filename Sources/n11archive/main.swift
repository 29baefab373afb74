import ArgumentParser
import Glibc
import N11System

// Secrets are about to be held: keep them out of core dumps before anything else runs.
ProcessHardening.disableCoreDumps()
// Before any thread starts: Ctrl-C and SIGTERM clean up what this run made, then end it.
Interruption.install()
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
    try command.run()
} catch is PartialSuccess {
    SpoolFiles.removeAll()
    exit(ExitCode.partial.rawValue)
} catch let error as CategorizedError {
    Console.error(error.description)
    if let hint = error.hint { Console.hint(hint) }
    fail(code: ExitCode(for: error.kind).rawValue, message: error.description, hint: error.hint)
} catch {
    // Argument parsing errors, --help and --version: ArgumentParser prints them and picks
    // the code (64 for usage errors, 0 for help).
    let code = N11Archive.exitCode(for: error)
    if Output.json && code != .success {
        let message = N11Archive.message(for: error)
        Console.error(message)
        fail(code: code.rawValue, message: message, hint: "see `n11archive \(Output.commandName(from: arguments)) --help`")
    }
    N11Archive.exit(withError: error)
}
