import Foundation
import Glibc
import Testing
import N11TestSupport

// `password generate` through the binary (stdout holds the password alone, stderr the
// entropy, -o makes a new 0600 file) and the weak-password policy of `create --portable`.

@Suite("n11archive CLI: passwords")
struct PasswordCLITests {
    static let symbols = Set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~".utf8)
    static let alphanumerics = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8)

    /// The EFF large list's four words with a hyphen of their own.
    static let hyphenated: Set<String> = ["drop-down", "felt-tip", "t-shirt", "yo-yo"]

    /// A passphrase's words: its pieces between '-', a hyphenated list word kept whole (a run
    /// that drew "felt-tip" printed six words in seven pieces).
    static func words(of phrase: String) -> [String] {
        var words: [String] = []
        var pieces = phrase.trimmingCharacters(in: .newlines).split(separator: "-").map(String.init)[...]
        while let piece = pieces.popFirst() {
            if let next = pieces.first, hyphenated.contains(piece + "-" + next) {
                words.append(piece + "-" + next)
                pieces.removeFirst()
            } else {
                words.append(piece)
            }
        }
        return words
    }

    @Test("password generate --words N prints N EFF words joined by '-' with the entropy labels; bad combinations are 64")
    func passphrase() throws {
        try withSandbox { s in
            let run = try s.run(["password", "generate", "--words", "6"])
            expectExit(run, 0)
            let words = Self.words(of: run.out)
            #expect(words.count == 6, "\(run)")
            #expect(words.allSatisfy { $0.allSatisfy { $0.isLowercase || $0 == "-" } }, "\(run)")
            #expect(Self.words(of: "mowing-felt-tip-remindful-bony-stamp-lego").count == 6)
            #expect(run.err.contains("entropy: 77 bits (Strong)"), "\(run)")
            let file = s.path("phrase")
            expectExit(try s.run(["password", "generate", "--words", "8", "-o", file]), 0)
            #expect(Self.words(of: try String(contentsOfFile: file, encoding: .utf8)).count == 8)
            // The passphrase is a good portable-archive password as it is.
            _ = try s.fillVault()
            expectExit(try s.run(["create", "--portable", "-o", s.path("a.nu11vlt"), "--password-file", file] + fastKDF), 0)
            expectExit(try s.run(["password", "generate", "--words", "0"]), 64)
            expectExit(try s.run(["password", "generate", "--words", "6", "--no-symbols"]), 64)
        }
    }

    @Test("password generate: the password alone on stdout, its entropy on stderr")
    func generate() throws {
        try withSandbox { s in
            let standard = try s.run(["password", "generate"])
            expectExit(standard, 0)
            #expect(standard.stdout.count == 25 && standard.stdout.last == UInt8(ascii: "\n"), "\(standard)")
            #expect(Set(standard.stdout.dropLast()).isSubset(of: Self.alphanumerics.union(Self.symbols)))
            #expect(standard.err == "n11archive: entropy: 157 bits (Very Strong)\n")
            // Only the password on stdout: nothing of it on stderr.
            #expect(!standard.err.contains(String(decoding: standard.stdout.dropLast(), as: UTF8.self)))

            let narrow = try s.run(["password", "generate", "--length", "8", "--no-symbols", "--no-upper"])
            expectExit(narrow, 0)
            #expect(narrow.stdout.count == 9)
            #expect(Set(narrow.stdout.dropLast()).isSubset(of: Set("abcdefghijklmnopqrstuvwxyz0123456789".utf8)))
            #expect(narrow.err.contains("entropy: 41 bits (Moderate)"), "\(narrow)")

            let digits = try s.run(["password", "generate", "--length", "6", "--no-symbols", "--no-upper", "--no-lower"])
            #expect(digits.err.contains("entropy: 19 bits (Weak)"), "\(digits)")
            #expect(try s.run(["password", "generate"]).stdout != standard.stdout)
        }
    }

    @Test("password generate refuses a length under 1 and no character class (64)", arguments: [
        (["--length", "0"], "--length must be 1 to 4096, not 0"),
        (["--length", "4097"], "--length must be 1 to 4096"),
        (["--no-upper", "--no-lower", "--no-digits", "--no-symbols"], "leave no characters; keep at least one class"),
    ])
    func refused(arguments: [String], message: String) throws {
        try withSandbox { s in
            let result = try s.run(["password", "generate"] + arguments)
            expectExit(result, 64)
            #expect(result.err.contains(message), "\(result)")
            #expect(result.stdout.isEmpty)
        }
    }

    @Test("a usage error under --json names the whole command, `password generate`")
    func usageErrorDocumentNamesSubcommand() throws {
        try withSandbox { s in
            let result = try s.run(["password", "generate", "--length", "0", "--json"])
            try expectErrorDocument(result, 64, command: "password generate")
        }
    }

    @Test("password generate -o makes a new 0600 file and never replaces one")
    func generateToFile() throws {
        try withSandbox { s in
            let path = s.path("pw")
            let made = try s.run(["password", "generate", "-o", path, "--length", "40"])
            expectExit(made, 0)
            #expect(made.stdout.isEmpty, "the password went to stdout too: \(made)")
            let bytes = try readBytes(path)
            #expect(bytes.count == 41 && bytes.last == UInt8(ascii: "\n"))
            var st = stat()
            #expect(stat(path, &st) == 0 && st.st_mode & 0o777 == 0o600)
            #expect(made.err.contains("entropy: 262 bits (Very Strong)"), "\(made)")

            let again = try s.run(["password", "generate", "-o", path])
            expectExit(again, 73)
            #expect(again.err.contains("'\(path)' already exists; no password was written"), "\(again)")
            #expect(again.err.contains("hint: choose another FILE"))
            #expect(try readBytes(path) == bytes, "the existing password file was changed")

            // The file it wrote works as a portable archive's password file.
            try s.initialize()
            expectExit(try s.run(["vault", "add", try s.file("a.jpg", [1, 2, 3])]), 0)
            let archive = s.path("a.nu11vlt")
            let created = try s.run(["create", "--portable", "-o", archive, "--password-file", path] + fastKDF)
            expectExit(created, 0)
            #expect(!created.err.contains("password's estimated entropy"), "\(created)")
            expectExit(try s.run(["verify", archive, "--password-file", path]), 0)
        }
    }

    @Test("create --portable refuses a password under 40 estimated bits, writing nothing (64)")
    func weakPasswordRefused() throws {
        try withSandbox { s in
            try s.initialize()
            expectExit(try s.run(["vault", "add", try s.file("a.jpg", [1, 2, 3])]), 0)
            let out = s.path("out")
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
            let archive = out + "/a.nu11vlt"
            let weak = try s.passwordFile("secret\n", name: "weak")   // 6 × log2(26) ≈ 28 bits
            let refused = try s.run(["create", "--portable", "-o", archive, "--password-file", weak] + fastKDF)
            expectExit(refused, 64)
            #expect(refused.err.contains("error: the password is too weak for a portable archive: estimated 28 bits (Weak); nothing was written"), "\(refused)")
            #expect(refused.err.contains("--allow-weak-password") && refused.err.contains("n11archive password generate"))
            #expect(!refused.err.contains("secret"), "the password appeared in a message")
            #expect(try FileManager.default.contentsOfDirectory(atPath: out).isEmpty, "something was written")

            let allowed = try s.run(["create", "--portable", "-o", archive, "--password-file", weak, "--allow-weak-password"] + fastKDF)
            expectExit(allowed, 0)
            #expect(allowed.err.contains("warning: the password's estimated entropy is 28 bits (Weak)"), "\(allowed)")
            expectExit(try s.run(["verify", archive, "--password-file", weak]), 0)
        }
    }

    @Test("create --portable warns about a password under 60 bits and accepts it; a strong one passes quietly")
    func moderatePasswordWarned() throws {
        try withSandbox { s in
            try s.initialize()
            let moderate = try s.passwordFile("abcdefghij\n", name: "moderate")   // 10 × log2(26) ≈ 47 bits
            let warned = try s.run(["create", "--portable", "-o", s.path("m.nu11vlt"), "--password-file", moderate] + fastKDF)
            expectExit(warned, 0)
            #expect(warned.err.contains("n11archive: warning: the password's estimated entropy is 47 bits (Moderate)"), "\(warned)")
            #expect(warned.err.contains("n11archive password generate"))

            let strong = try s.run(["create", "--portable", "-o", s.path("s.nu11vlt"), "--password-file", try s.passwordFile()] + fastKDF)
            expectExit(strong, 0)
            #expect(!strong.err.contains("entropy"), "\(strong)")
        }
    }

    @Test("secure archives need no password, so --allow-weak-password changes nothing there")
    func secureUnaffected() throws {
        try withSandbox { s in
            try s.initialize()
            let made = try s.run(["create", "--secure", "-o", s.path("s.nu11vlt"), "--allow-weak-password"])
            expectExit(made, 0)
            #expect(!made.err.contains("password"), "\(made)")
        }
    }
}
