import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format
import N11System

struct TextCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "text",
        abstract: "Encrypt and decrypt text messages in the Ciphio apps' format.",
        discussion: """
        Examples:
          echo "meet at six" | n11archive text encrypt --password-file pw
          n11archive text decrypt message.txt --password-file pw
        A message is ALG:BASE64(salt, IV, ciphertext), ALG gcm (the default), cbc or ctr; \
        the key is PBKDF2-HMAC-SHA256 (100,000 iterations) of the password, which comes \
        from the same places as archive passwords, never from a flag value. Only gcm \
        messages are authenticated.
        """,
        subcommands: [Encrypt.self, Decrypt.self])

    static let maximumText = 16 << 20

    /// The text of FILE, or of standard input for `-` or no FILE.
    static func readInput(_ file: String?) throws -> [UInt8] {
        let fd: FileDescriptor
        if let file, file != "-" {
            guard (try? FileStatus.of(file, followLinks: true)) ?? nil != nil else {
                throw CLIError(.missingInput, "'\(file)' does not exist", hint: "give the file, or - (or nothing) for standard input")
            }
            fd = try FileDescriptor.openForReading(file)
        } else {
            fd = FileDescriptor(borrowing: 0, path: "standard input")
        }
        do { return try fd.readAll(limit: maximumText) }
        catch { throw CLIError(.usage, "the text is larger than 16 MiB; nothing was written") }
    }

    static func warnUnauthenticated(_ algorithm: CiphioMessage.Algorithm, decrypting: Bool) {
        guard algorithm != .gcm else { return }
        Console.warning(decrypting
            ? "this \(algorithm.rawValue) message is not authenticated: a change to it cannot be detected, and a wrong password may give garbage instead of an error"
            : "\(algorithm.rawValue) messages are not authenticated: a change to one goes unnoticed; use gcm unless the other side cannot read it")
    }
}

extension TextCommand {
    struct Encrypt: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Encrypt text (a file, or standard input) into a Ciphio message on standard output.",
            discussion: "Example:\n  n11archive text encrypt note.txt --algorithm gcm --password-file pw")

        @Argument(help: ArgumentHelp("The text (default: standard input).", valueName: "FILE"), completion: .file()) var file: String?
        @Option(help: ArgumentHelp("gcm (default, authenticated), cbc or ctr.", valueName: "ALG"))
        var algorithm: String = "gcm"
        @OptionGroup var password: PasswordOptions

        func validate() throws {
            guard CiphioMessage.Algorithm(rawValue: algorithm) != nil else { throw ValidationError("--algorithm must be gcm, cbc or ctr") }
        }

        func run() throws {
            let chosen = CiphioMessage.Algorithm(rawValue: algorithm) ?? .gcm
            var text = try TextCommand.readInput(file)
            let plain = try SecureBytes(copying: text)
            text.wipe()
            let secret = try password.read(confirm: true)
            TextCommand.warnUnauthenticated(chosen, decrypting: false)
            Console.out(try CiphioText.encrypt(plain, secret: secret, algorithm: chosen))
        }
    }

    struct Decrypt: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Decrypt a Ciphio message (a file, or standard input) to standard output.",
            discussion: "Example:\n  n11archive text decrypt message.txt --password-file pw")

        @Argument(help: ArgumentHelp("The message (default: standard input).", valueName: "FILE"), completion: .file()) var file: String?
        @OptionGroup var password: PasswordOptions

        func run() throws {
            var raw = try TextCommand.readInput(file)
            let text = String(decoding: raw, as: UTF8.self)
            raw.wipe()
            let secret = try password.read(confirm: false)
            let (plain, algorithm) = try CiphioText.decrypt(text, secret: secret, source: file.map { "'\($0)'" } ?? "standard input")
            TextCommand.warnUnauthenticated(algorithm, decrypting: true)
            plain.withUnsafeBytes { FileHandle.standardOutput.write(Data($0)) }
        }
    }
}
