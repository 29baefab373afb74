import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format

/// How a portable archive's password is supplied. Deliberately no `--password VALUE`.
struct PasswordOptions: ParsableArguments {
    @Option(name: .customLong("password-file"),
            help: ArgumentHelp("Read the archive password from the first line of FILE ($N11_PASSWORD_FILE also works).", valueName: "FILE"),
            completion: .file())
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

    /// Whether a password flag was given (the environment's sources may be set for other commands).
    var flagGiven: Bool { passwordFile != nil || passwordFD != nil || passwordCommand != nil }

    /// A source the user named (flag or environment), as opposed to the terminal.
    var explicitSource: SecretSource? {
        guard let source, case .terminal = source else { return source }
        return nil
    }

    var source: SecretSource? {
        SecretSource.choose(file: passwordFile, descriptor: passwordFD, command: passwordCommand,
                            environmentFile: "N11_PASSWORD_FILE", environmentCommand: "N11_PASSWORD_COMMAND")
    }

    /// Reads the password; `confirm` asks twice on a terminal (creating an archive). Before a
    /// prompt for an existing archive's password, says what each attempt will cost (`kdf`),
    /// so a person is not left wondering why a wrong guess takes seconds.
    func read(confirm: Bool, cost kdf: ArchiveHeader.KDF? = nil) throws -> SecureBytes {
        guard let source else {
            throw CLIError(.usage, "a portable archive needs a password and there is no terminal to ask for it",
                           hint: "give it with --password-file FILE (mode 0600), --password-fd N, --password-command CMD or N11_PASSWORD_FILE")
        }
        if case .terminal = source, let kdf {
            Console.note("each attempt at this password costs Argon2id, \(kdf.opsLimit) pass\(kdf.opsLimit == 1 ? "" : "es") of \((kdf.memoryKiB + 1023) >> 10) MiB")
        }
        return try source.read(what: "password", confirm: confirm)
    }
}

/// How much Argon2id memory unlocking an archive may cost on this machine (`KDFCeiling`).
struct KDFCeilingOptions: ParsableArguments {
    @Option(name: .customLong("allow-kdf-memory"),
            help: ArgumentHelp("Unlock portable archives whose Argon2id asks for up to MIB of memory (default \(KDFCeiling.standardMemoryMiB); $N11_ALLOW_KDF_MEMORY also works).",
                               valueName: "MIB"))
    var allowKDFMemory: UInt64?

    static let environmentName = "N11_ALLOW_KDF_MEMORY"
    static let range: ClosedRange<UInt64> = 1...1024

    func validate() throws {
        if let allowKDFMemory, !Self.range.contains(allowKDFMemory) {
            throw ValidationError("--allow-kdf-memory must be 1…1024 MiB (the format's own limit is 1 GiB)")
        }
    }

    /// The flag, else the environment, else the standard ceiling.
    func ceiling() throws -> KDFCeiling {
        if let allowKDFMemory { return KDFCeiling(memoryMiB: allowKDFMemory) }
        guard let text = ProcessInfo.processInfo.environment[Self.environmentName], !text.isEmpty else { return .standard }
        guard let value = UInt64(text), Self.range.contains(value) else {
            throw CLIError(.usage, "\(Self.environmentName)='\(text)' is not a number of MiB from 1 to 1024")
        }
        return KDFCeiling(memoryMiB: value)
    }
}
