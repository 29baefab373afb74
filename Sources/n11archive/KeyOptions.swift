import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Vault

/// The passphrase of a private key file (`key export-private`, `key import`, `--identity`).
/// Like passwords, never a flag value.
struct PassphraseOptions: ParsableArguments {
    @Option(name: .customLong("passphrase-file"),
            help: ArgumentHelp("Read a private key file's passphrase from the first line of FILE ($N11_PASSPHRASE_FILE also works).",
                               valueName: "FILE"), completion: .file())
    var passphraseFile: String?

    @Option(name: .customLong("passphrase-fd"), help: ArgumentHelp("Read a private key file's passphrase from file descriptor N.", valueName: "N"))
    var passphraseFD: Int32?

    func validate() throws {
        if passphraseFile != nil && passphraseFD != nil { throw ValidationError("give only one of --passphrase-file and --passphrase-fd") }
    }

    /// The shortest passphrase a new file is sealed under.
    static let minimumLength = 8

    /// Whether the passphrase is asked on the terminal (no file or descriptor given).
    var typedOnTerminal: Bool {
        if case .terminal = SecretSource.choose(file: passphraseFile, descriptor: passphraseFD, environmentFile: "N11_PASSPHRASE_FILE") {
            return true
        }
        return false
    }

    /// Reads the passphrase of `path`; `confirm` asks twice on a terminal (a new file), and
    /// then a passphrase under 8 characters is refused before the second prompt.
    /// `pemKey`: the passphrase seals a PEM private key, which OpenSSL can read back only
    /// up to 1,023 bytes without a NUL byte.
    func read(for path: String, confirm: Bool, pemKey: Bool = false) throws -> SecureBytes {
        guard let source = SecretSource.choose(file: passphraseFile, descriptor: passphraseFD, environmentFile: "N11_PASSPHRASE_FILE") else {
            throw CLIError(.usage, "'\(path)' needs a passphrase and there is no terminal to ask for it",
                           hint: "give it with --passphrase-file FILE or --passphrase-fd N")
        }
        let check = { (secret: SecureBytes) throws in
            guard secret.count >= Self.minimumLength else {
                throw CLIError(.usage, "a passphrase must have at least \(Self.minimumLength) characters; nothing was written")
            }
            // What OpenSSL (and so `key import`, --identity, `openssl pkey`) can read back.
            guard !pemKey || P256PrivateKey.isUsablePEMPassphrase(secret) else {
                throw CLIError(.usage, "a passphrase must have at most \(P256PrivateKey.maximumPEMPassphraseLength) bytes and no NUL byte; nothing was written",
                               hint: "a longer one could not be read back by `key import`, --identity or `openssl pkey`")
            }
        }
        // On a terminal `accept` runs before the second prompt; from a file, right after.
        let secret = try source.read(what: "passphrase", confirm: confirm, subject: "'\(path)'", accept: confirm ? check : nil)
        if confirm { try check(secret) }
        return secret
    }
}

/// Private keys that may open an archive's recipient slots, besides the key store's own.
struct IdentityOptions: ParsableArguments {
    @Option(name: .customLong("identity"),
            help: ArgumentHelp("A P-256 private key file (PKCS#8 PEM, as `key export-private` writes) that may open the archive; repeatable.",
                               valueName: "FILE"), completion: .file())
    var identityFiles: [String] = []

    @OptionGroup var passphrase: PassphraseOptions

    /// The identities of the files, read (and their passphrases asked) only when called.
    func fromFiles() throws -> [P256PrivateKey] {
        try identityFiles.map { path in
            try TerminalRetry.run(typed: passphrase.typedOnTerminal, what: "passphrase for '\(path)'", isWrong: { error in
                if case ArchiveError.wrongPassphrase = error { return true } else { return false }
            }) {
                try KeyFiles.identity(inFile: path) { try passphrase.read(for: path, confirm: false) }
            }
        }
    }
}

/// Who a new portable archive is for, besides (or instead of) a password.
struct RecipientOptions: ParsableArguments {
    @Option(name: .customLong("recipient"),
            help: ArgumentHelp("Encrypt to the P-256 public key in FILE (PEM, as `key export-public` or FileLock write); repeatable. With recipients only, no password is asked.",
                               valueName: "FILE"), completion: .file())
    var recipientFiles: [String] = []

    @Option(name: .customLong("recipients-file"),
            help: ArgumentHelp("Encrypt to every public key in FILE (PEM blocks, or one base64 key per line); repeatable.", valueName: "FILE"), completion: .file())
    var recipientsFiles: [String] = []

    var isEmpty: Bool { recipientFiles.isEmpty && recipientsFiles.isEmpty }

    func keys() throws -> [P256PublicKey] { try Self.keys(in: recipientFiles + recipientsFiles) }

    /// The keys of these files, each once, in the order given.
    static func keys(in paths: [String]) throws -> [P256PublicKey] {
        var seen = Set<P256PublicKey>()
        var keys: [P256PublicKey] = []
        for path in paths {
            for key in try KeyFiles.publicKeys(inFile: path) where seen.insert(key).inserted { keys.append(key) }
        }
        return keys
    }
}
