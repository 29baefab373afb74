import ArgumentParser
import N11Crypto
import N11Format
import N11System

struct PasswordCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "password",
        abstract: "Generate strong passwords for portable archives.",
        discussion: """
        Examples:
          n11archive password generate -o ~/.n11pass     # a new 0600 file, then:
          n11archive create --portable -o vault.nu11vlt --password-file ~/.n11pass
        """,
        subcommands: [Generate.self])
}

extension PasswordCommand {
    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a random password from the system CSPRNG, and its entropy.",
            discussion: """
            Examples:
              n11archive password generate                   # 24 characters, all classes
              n11archive password generate --length 32 --no-symbols
              n11archive password generate -o ~/.n11pass     # a new file, mode 0600
              n11archive password generate --words 6         # six EFF words
            The password alone goes to stdout (or FILE), the entropy to stderr:
            "entropy: 157 bits (Very Strong)" is length x log2(pool size), exact here \
            because every character is drawn uniformly and independently (there is \
            no "one of each class" rule). Weak < 40 bits, Moderate < 60, Strong < 100, \
            Very Strong >= 100. Pools: a-z, A-Z, 0-9, the 32 ASCII punctuation marks. \
            --words N makes a passphrase of N words from the EFF large wordlist (7,776 \
            words, 12.9 bits each, by the Electronic Frontier Foundation, CC BY 3.0 US) \
            joined by -: six words give 77 bits and are easy to type at a restore prompt.
            """)

        @Option(help: ArgumentHelp("Number of characters (1-\(PasswordGenerator.maximumLength)).", valueName: "N"))
        var length: Int = PasswordGenerator.defaultLength

        @Flag(name: .customLong("no-upper"), help: "Leave out A-Z.") var noUpper = false
        @Flag(name: .customLong("no-lower"), help: "Leave out a-z.") var noLower = false
        @Flag(name: .customLong("no-digits"), help: "Leave out 0-9.") var noDigits = false
        @Flag(name: .customLong("no-symbols"), help: "Leave out ASCII punctuation.") var noSymbols = false

        @Option(help: ArgumentHelp("A passphrase of N words from the EFF large wordlist instead (1-\(PassphraseGenerator.maximumWords); 6 is 77 bits).",
                                   valueName: "N"))
        var words: Int?

        @Option(name: [.short, .customLong("output")],
                help: ArgumentHelp("Write the password to a new FILE (mode 0600); an existing FILE is never replaced.", valueName: "FILE"), completion: .file())
        var output: String?

        var classes: CharacterClasses {
            var set = CharacterClasses.all
            if noUpper { set.remove(.uppercase) }
            if noLower { set.remove(.lowercase) }
            if noDigits { set.remove(.digits) }
            if noSymbols { set.remove(.symbols) }
            return set
        }

        func validate() throws {
            if let words {
                guard (1...PassphraseGenerator.maximumWords).contains(words) else {
                    throw ValidationError("--words must be 1 to \(PassphraseGenerator.maximumWords), not \(words)")
                }
                let characterOptions = length != PasswordGenerator.defaultLength || noUpper || noLower || noDigits || noSymbols
                if characterOptions { throw ValidationError("--words makes a passphrase: --length and --no-… are for character passwords") }
            }
            guard (1...PasswordGenerator.maximumLength).contains(length) else {
                throw ValidationError("--length must be 1 to \(PasswordGenerator.maximumLength), not \(length)")
            }
            guard !classes.isEmpty else {
                throw ValidationError("--no-upper, --no-lower, --no-digits and --no-symbols leave no characters; keep at least one class")
            }
        }

        func run() throws {
            let generator: any SecretGenerator = try words.map { try PassphraseGenerator(words: $0) }
                ?? PasswordGenerator(length: length, classes: classes)
            if let output {
                try write(generator, to: output)
            } else {
                let password = try generator.generate()
                let stdout = FileDescriptor(borrowing: 1, path: "stdout")
                try password.withUnsafeBytes { try stdout.write(raw: $0) }
                try stdout.write([UInt8(ascii: "\n")])
            }
            Console.note("entropy: \(generator.entropy)")
        }

        /// A new 0600 file that appears only complete (AtomicFile), and never over an existing
        /// one: a password file someone already uses must not be lost to a typo.
        private func write(_ generator: any SecretGenerator, to path: String) throws {
            if (try? FileStatus.of(path)) ?? nil != nil {
                throw CLIError(.outputExists, "'\(path)' already exists; no password was written",
                               hint: "choose another FILE, or remove that one first if it is no longer needed")
            }
            let password = try generator.generate()
            let file = try AtomicFile(path: path, mode: 0o600)
            try password.withUnsafeBytes { try file.descriptor.write(raw: $0) }
            try file.descriptor.write([UInt8(ascii: "\n")])
            do { try file.commit(replaceExisting: false) }
            catch let error as SystemError where error.isAlreadyExisting {
                throw CLIError(.outputExists, "'\(path)' appeared meanwhile; no password was written",
                               hint: "choose another FILE")
            }
            Console.note("wrote a new password to \(path) (mode 0600)")
        }
    }
}

/// `create --portable` with a password the user chose: refuse one whose estimated entropy is
/// under 40 bits ("Weak"), warn under 60. The estimate is generous (see
/// `PasswordStrengthEstimate`), so passing it does not make a password good; failing it means
/// the password is guessable whatever Argon2id costs.
enum WeakPasswordPolicy {
    static let refuseBelowBits = 40.0
    static let warnBelowBits = 60.0

    static func check(_ password: SecureBytes, allowWeak: Bool) throws {
        let entropy = PasswordStrengthEstimate.entropy(of: password)
        if entropy.bits < refuseBelowBits && !allowWeak {
            throw CLIError(.usage, "the password is too weak for a portable archive: estimated \(entropy); nothing was written",
                           hint: "use a longer password (e.g. from `n11archive password generate -o FILE`), or pass --allow-weak-password if you accept that it can be guessed")
        }
        if entropy.bits < warnBelowBits {
            Console.warning("the password's estimated entropy is \(entropy); below 60 bits it may be guessed (`n11archive password generate` makes a strong one)")
        }
    }
}

/// What `password generate` draws from: characters or words.
protocol SecretGenerator {
    var entropy: PasswordEntropy { get }
    func generate() throws(CryptoError) -> SecureBytes
}

extension PasswordGenerator: SecretGenerator {}
extension PassphraseGenerator: SecretGenerator {}
