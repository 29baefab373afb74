import ArgumentParser

/// A usage error in n11archive's own words: the parser's message (lower-cased first letter,
/// as every other error), and a hint that names the closest command for a mistyped one.
enum UsageProblem {
    static func describe(_ error: any Error, arguments: [String]) -> (message: String, hint: String) {
        var message = N11Archive.message(for: error)
        if let first = message.first, first.isUppercase, !message.hasPrefix("ID") {
            message = first.lowercased() + message.dropFirst()
        }
        // A password given as a flag would show in `ps` and the shell's history; the
        // parser's "did you mean '--password-fd'" would lead on to a descriptor number.
        if let flag = arguments.lazy.compactMap(Self.secretFlag).first {
            return ("a \(flag.secret) is never taken as a flag's value: it would show in `ps` and in the shell's history", flag.sources)
        }
        // `create --portable backup.nu11vlt`: the archive's name without its -o.
        if message.hasPrefix("give exactly one of -o FILE and --output-dir DIR"),
           let name = arguments.indices.first(where: { arguments[$0].hasSuffix(".nu11vlt")
               && ($0 == 0 || !["-o", "--output", "--output-dir"].contains(arguments[$0 - 1])) }).map({ arguments[$0] }) {
            return (message, "did you mean `-o \(name)`? (an archive's name follows -o)")
        }
        let (path, unknown, choices) = commandPath(of: arguments)
        let command = (["n11archive"] + path).joined(separator: " ")
        // `init --password-file pw`: the key store has a PIN or none; passwords are archives'.
        if path == ["init"], message.hasPrefix("unknown option '--password") {
            return (message, "init asks for no password: the key store is a 0600 file in the home, sealed under a PIN with --pin (--pin-file FILE); "
                        + "a password is given to `create --portable` for each archive")
        }
        // The words of other backup tools, and the vault's commands without `vault`.
        if path.isEmpty, let unknown, let meant = Self.otherToolsWords[unknown] {
            return ("unknown command '\(unknown)'", "did you mean `n11archive \(meant)`? (`n11archive --help` lists the commands)")
        }
        if let unknown, let meant = Suggestion.closest(to: unknown, among: choices) {
            return ("unknown command '\(unknown)'", "did you mean `\(command) \(meant)`? (`\(command) --help` lists the commands)")
        }
        if let unknown { return ("unknown command '\(unknown)'", "`\(command) --help` lists the commands") }
        return (message, "see `\(command) --help`")
    }

    /// What a word from restic, borg, tar or age is called here (a mistyped command is left
    /// to `Suggestion`).
    private static let otherToolsWords = [
        "backup": "create --portable -o FILE", "export": "restore ARCHIVE --export DIR", "extract": "restore ARCHIVE --export DIR",
        "check": "verify ARCHIVE", "snapshots": "archives DIR", "forget": "prune DIR",
        "add": "vault add FILE", "cat": "vault cat ITEM", "rm": "vault rm ITEM", "ls": "vault list",
    ]

    /// `--password`, `--password=…` and the like, which no command takes (`--pin` is a flag
    /// of `init`; `--pin=…` would be a PIN), with the ways that secret can be given.
    private static func secretFlag(_ word: String) -> (secret: String, sources: String)? {
        let flag = word.split(separator: "=", maxSplits: 1).first.map(String.init) ?? word
        switch flag {
        case "--password", "--pass":
            return ("password", "use --password-file FILE (its first line), --password-fd N, --password-command CMD, N11_PASSWORD_FILE, or type it at the prompt")
        case "--new-password":
            return ("password", "rekey reads the added password from --new-password-file FILE or --new-password-fd N, or asks for it twice at the prompt")
        case "--passphrase":
            return ("passphrase", "a private key file's passphrase comes from --passphrase-file FILE or --passphrase-fd N; "
                        + "an archive's password from --password-file FILE, --password-fd N or --password-command CMD; or type it at the prompt")
        case "--pin" where word.hasPrefix("--pin="):
            return ("PIN", "use --pin-file FILE (its first line), --pin-fd N, N11_PIN_FILE, or type it at the prompt")
        default:
            return nil
        }
    }

    /// The subcommands named in `arguments`, and the first word that should have been a
    /// subcommand and is none (with the names it could have been).
    private static func commandPath(of arguments: [String]) -> (path: [String], unknown: String?, choices: [String]) {
        var command: ParsableCommand.Type = N11Archive.self
        var path: [String] = []
        for word in arguments where !word.hasPrefix("-") {
            let subcommands = command.configuration.subcommands
            guard !subcommands.isEmpty else { break }
            let names = subcommands.map { $0._commandName }
            guard let index = names.firstIndex(of: word) else { return (path, word, names) }
            command = subcommands[index]
            path.append(word)
        }
        return (path, nil, [])
    }
}

/// "Did you mean": the closest word by edit distance, if it is close enough to be a typo.
enum Suggestion {
    static func closest(to word: String, among candidates: [String]) -> String? {
        let scored = candidates.map { ($0, distance(word, $0)) }.min { $0.1 < $1.1 }
        guard let (best, score) = scored, score <= max(2, word.count / 3) || best.hasPrefix(word) else { return nil }
        return best
    }

    /// Levenshtein distance.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(1, b.count) where !b.isEmpty {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return a.isEmpty ? b.count : previous[b.count]
    }
}
