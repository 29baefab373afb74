import ArgumentParser
import Glibc
import N11System

// Secrets are about to be held: keep them out of core dumps before anything else runs.
ProcessHardening.disableCoreDumps()

do {
    var command = try N11Archive.parseAsRoot()
    try command.run()
} catch let error as CategorizedError {
    Console.error(error.description)
    if let hint = error.hint { Console.hint(hint) }
    exit(ExitCode(for: error.kind).rawValue)
} catch {
    // Argument parsing errors, --help and --version: ArgumentParser prints them and picks
    // the code (64 for usage errors, 0 for help).
    N11Archive.exit(withError: error)
}
