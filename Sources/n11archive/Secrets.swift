import Foundation
import N11Crypto
import N11System

/// Where a secret (PIN or password) comes from. Never a flag value: a value on the command
/// line is visible in `ps` and in shell history (DESIGN.md §3.4). The bytes go straight
/// from the file, descriptor or terminal into locked memory.
enum SecretSource {
    case file(String)
    case descriptor(Int32)
    case command(String)
    case terminal

    /// The first source given: flag file, flag descriptor, environment file, else the
    /// controlling terminal if there is one, whatever stdin is (`echo x | vault add --note`
    /// still asks for the PIN on /dev/tty). nil when nothing can supply the secret (cron,
    /// systemd and CI jobs have no controlling terminal).
    static func choose(file: String?, descriptor: Int32?, command: String? = nil, environmentFile: String,
                       environmentCommand: String? = nil) -> SecretSource? {
        let environment = ProcessInfo.processInfo.environment
        if let file { return .file(file) }
        if let descriptor { return .descriptor(descriptor) }
        if let command { return .command(command) }
        if let path = environment[environmentFile], !path.isEmpty { return .file(path) }
        if let name = environmentCommand, let command = environment[name], !command.isEmpty { return .command(command) }
        if Terminal.hasControlling() { return .terminal }
        return nil
    }

    /// The options' stem for a secret named `what`: "new PIN" is given with --new-pin-file.
    static func optionStem(_ what: String) -> String { what.lowercased().replacingOccurrences(of: " ", with: "-") }

    /// Reads the secret. `what` names it in prompts and errors ("PIN", "password");
    /// `confirm` asks twice on a terminal (when setting a new one).
    /// `accept` checks a new secret's rules right after it is typed, before "Repeat".
    /// `subject` names what the secret is for in a terminal prompt (a key file, say), so that
    /// a person asked for several secrets knows which one.
    func read(what: String, confirm: Bool = false, subject: String? = nil, accept: ((SecureBytes) throws -> Void)? = nil) throws -> SecureBytes {
        do { return try readChecked(what: what, confirm: confirm, subject: subject, accept: accept) }
        catch let error as CryptoError {
            // Too long, or an unreadable descriptor: the user's input, not damaged data.
            throw CLIError(.usage, "cannot read the \(what): \(error.description)")
        }
    }

    private func readChecked(what: String, confirm: Bool, subject: String?, accept: ((SecureBytes) throws -> Void)?) throws -> SecureBytes {
        let secret: SecureBytes
        switch self {
        case .file(let path):
            let fd: FileDescriptor
            do { fd = try FileDescriptor.openForReading(path) }
            catch {
                throw CLIError(.missingInput, "cannot read the \(what) file '\(path)': \((error as? SystemError)?.reason ?? "\(error)")",
                               hint: "check the path given with --\(Self.optionStem(what))-file (or $N11_\(Self.optionStem(what).uppercased().replacingOccurrences(of: "-", with: "_"))_FILE); nothing was changed")
            }
            Self.warnIfOpen(fd, what: what)
            secret = try SecureBytes.readSecret(from: fd)
        case .descriptor(let n):
            secret = try SecureBytes.readSecret(from: FileDescriptor(borrowing: n, path: "file descriptor \(n)"))
        case .command(let command):
            secret = try Self.run(command, what: what)
        case .terminal:
            guard let tty = Terminal.openControlling() else {
                throw CLIError(.usage, "no terminal to ask for the \(what)",
                               hint: "give it with --\(Self.optionStem(what))-file FILE or --\(Self.optionStem(what))-fd N")
            }
            // A progress line left open (Argon2id's time) must not run into the prompt.
            ProgressLine.closeBar()
            secret = try prompt(tty, "Enter \(what)\(subject.map { " for \($0)" } ?? ""): ")
            try accept?(secret)
            if confirm {
                let again = try prompt(tty, "Repeat \(what): ")
                guard secret.constantTimeEquals(again) else { throw CLIError(.usage, "the two \(what)s differ; nothing was done") }
            }
        }
        guard secret.count > 0 else {
            // Name where it came from: an empty file is most often the wrong file.
            let from: String
            switch self {
            case .file(let path): from = " (its file '\(path)' has an empty first line)"
            case .descriptor(let n): from = " (file descriptor \(n) gave an empty first line)"
            case .command: from = " (its command printed an empty first line)"
            case .terminal: from = ""
            }
            throw CLIError(.usage, "the \(what) is empty\(from)", hint: "an empty \(what) is never accepted; nothing was done")
        }
        return secret
    }

    /// A secret file that others can read (or that is not the user's) is named in a warning
    /// that survives --quiet: ssh refuses such key files; refusing here would break cron jobs
    /// that worked before, so the secret is still used. Pipes and devices are not checked.
    private static func warnIfOpen(_ fd: FileDescriptor, what: String) {
        guard let status = try? fd.status(), status.kind == .regular else { return }
        if status.permissions & 0o077 != 0 {
            Console.warning("the \(what) file '\(fd.path)' can be read by others (mode \(String(status.permissions, radix: 8))); run `chmod 600 '\(fd.path)'`")
        } else if !status.isOwnedByCurrentUser {
            Console.warning("the \(what) file '\(fd.path)' belongs to uid \(status.owner), not to you")
        }
    }

    /// How long a password command may take to exit once its first line was read; then it
    /// is killed. Its line is what counts, not how it cleans up.
    static let commandGracePeriod = 3.0

    /// Runs `sh -c command` and reads the secret from its standard output: the first line,
    /// straight from the pipe into locked memory. The rest is never read: the pipe is closed
    /// and the command reaped within `commandGracePeriod` (so `yes pw`, or a helper whose
    /// child keeps its output open, cannot hang a backup). A command that exits non-zero fails.
    private static func run(_ command: String, what: String) throws -> SecureBytes {
        let child: ShellCommand
        do { child = try ShellCommand.start(command) }
        catch { throw CLIError(.other, "cannot run the \(what) command: \((error as? SystemError)?.reason ?? "\(error)")") }
        let secret: SecureBytes
        do { secret = try SecureBytes.readSecret(from: child.output) }
        catch {
            _ = child.finish(gracePeriod: 0)
            throw error
        }
        switch child.finish(gracePeriod: commandGracePeriod) {
        case .exited(128 + SIGPIPE):
            // The shell's report of a command it ran that SIGPIPE ended (`yes pw`).
            return secret
        case .exited(let status) where status != 0:
            // No secret came: a password source that does not work, like a missing password
            // file (64), not a wrong password (77).
            throw CLIError(.usage, "the \(what) command failed (exit status \(status)); no \(what) was read",
                           hint: "run the command given with --\(what.lowercased())-command by hand to see why")
        case .signaled(let signal) where signal != SIGPIPE:
            throw CLIError(.usage, "the \(what) command was ended by signal \(signal); no \(what) was read")
        default:
            // Exited 0, ended by SIGPIPE when we stopped reading, or killed after it printed
            // its line and did not exit in time: the line is the secret.
            return secret
        }
    }

    private func prompt(_ tty: FileDescriptor, _ text: String) throws -> SecureBytes {
        try tty.write(Array(text.utf8))
        return try Terminal.withEchoDisabled(tty.rawValue) { try SecureBytes.readSecret(from: tty) }
    }
}
