import ArgumentParser
import N11Crypto

/// How a portable archive's password is supplied. Deliberately no `--password VALUE`.
struct PasswordOptions: ParsableArguments {
    @Option(name: .customLong("password-file"),
            help: ArgumentHelp("Read the archive password from the first line of FILE ($N11_PASSWORD_FILE also works).", valueName: "FILE"))
    var passwordFile: String?

    @Option(name: .customLong("password-fd"), help: ArgumentHelp("Read the archive password from file descriptor N.", valueName: "N"))
    var passwordFD: Int32?

    @Option(name: .customLong("password-command"),
            help: ArgumentHelp("Run CMD with sh -c and use the first line it prints ($N11_PASSWORD_COMMAND also works).", valueName: "CMD"))
    var passwordCommand: String?

    func validate() throws {
        let given = [passwordFile != nil, passwordFD != nil, passwordCommand != nil].filter { $0 }.count
        if given > 1 { throw ValidationError("give only one of --password-file, --password-fd and --password-command") }
    }

    var source: SecretSource? {
        SecretSource.choose(file: passwordFile, descriptor: passwordFD, command: passwordCommand,
                            environmentFile: "N11_PASSWORD_FILE", environmentCommand: "N11_PASSWORD_COMMAND")
    }

    /// Reads the password; `confirm` asks twice on a terminal (creating an archive).
    func read(confirm: Bool) throws -> SecureBytes {
        guard let source else {
            throw CLIError(.usage, "a portable archive needs a password and there is no terminal to ask for it",
                           hint: "give it with --password-file FILE (mode 0600), --password-fd N, --password-command CMD or N11_PASSWORD_FILE")
        }
        return try source.read(what: "password", confirm: confirm)
    }
}
