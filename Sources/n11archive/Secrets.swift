import Foundation
import N11Crypto
import N11System

/// Where a secret (PIN or password) comes from. Never a flag value: a value on the command
/// line is visible in `ps` and in shell history (DESIGN.md §3.4). The bytes go straight
/// from the file, descriptor or terminal into locked memory.
enum SecretSource {
    case file(String)
    case descriptor(Int32)
    case terminal

    /// The first source given: flag file, flag descriptor, environment file, else the
    /// terminal if there is one. nil when nothing can supply the secret (cron without a file).
    static func choose(file: String?, descriptor: Int32?, environmentFile: String) -> SecretSource? {
        if let file { return .file(file) }
        if let descriptor { return .descriptor(descriptor) }
        if let path = ProcessInfo.processInfo.environment[environmentFile], !path.isEmpty { return .file(path) }
        if Terminal.isTerminal(0) { return .terminal }
        return nil
    }

    /// Reads the secret. `what` names it in prompts and errors ("PIN", "password");
    /// `confirm` asks twice on a terminal (when setting a new one).
    func read(what: String, confirm: Bool = false) throws -> SecureBytes {
        let secret: SecureBytes
        switch self {
        case .file(let path):
            let fd: FileDescriptor
            do { fd = try FileDescriptor.openForReading(path) }
            catch { throw CLIError(.missingInput, "cannot read the \(what) file '\(path)': \((error as? SystemError)?.reason ?? "\(error)")") }
            secret = try SecureBytes.readSecret(from: fd)
        case .descriptor(let n):
            secret = try SecureBytes.readSecret(from: FileDescriptor(borrowing: n, path: "file descriptor \(n)"))
        case .terminal:
            guard let tty = Terminal.openControlling() else {
                throw CLIError(.usage, "no terminal to ask for the \(what)")
            }
            secret = try prompt(tty, "Enter \(what): ")
            if confirm {
                let again = try prompt(tty, "Repeat \(what): ")
                guard secret.constantTimeEquals(again) else { throw CLIError(.usage, "the two \(what)s differ; nothing was changed") }
            }
        }
        guard secret.count > 0 else { throw CLIError(.usage, "the \(what) is empty") }
        return secret
    }

    private func prompt(_ tty: FileDescriptor, _ text: String) throws -> SecureBytes {
        try tty.write(Array(text.utf8))
        return try Terminal.withEchoDisabled(tty.rawValue) { try SecureBytes.readSecret(from: tty) }
    }
}
