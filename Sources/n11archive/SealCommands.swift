import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11System
import N11Vault

/// FileLock's packages (seed 000): exchange single files with FileLock on iOS.
struct Seal: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Encrypt a file for a P-256 public key as a FileLock package.",
        discussion: """
        Examples:
          n11archive seal --to public_key.pem photo.jpg -o photo.filelock
          n11archive unseal photo.filelock -o photo.jpg
        The package is FileLock's: the AES-256-GCM key wrapped with Apple's ECIES \
        (eciesEncryptionCofactorX963SHA256AESGCM), the nonce, the ciphertext and the tag, \
        each after a big-endian 32-bit length; at most 4 GiB - 1 of content. The output \
        appears only when complete; an existing file is replaced only with --force.
        """)

    @Option(help: ArgumentHelp("The recipient's public key (PEM, as FileLock or `key export-public` write).", valueName: "FILE"), completion: .file())
    var to: String
    @Argument(help: ArgumentHelp("The file to encrypt.", valueName: "FILE"), completion: .file()) var input: String
    @Option(name: .short, help: ArgumentHelp("The package to write.", valueName: "OUT")) var output: String
    @Flag(help: "Replace OUT if it exists.") var force = false

    /// `-` reads stdin and writes stdout everywhere else in the tool; here it would be a file
    /// of that name: sealed without a word, or plaintext written to `./-`. A file named `-`
    /// is still `./-`.
    func validate() throws {
        if input == "-" { throw ValidationError("seal reads a file, not standard input ('-'); save the content to a file first (a file named '-' is ./-)") }
        if output == "-" { throw ValidationError("seal writes a package file, not standard output (-o -); give -o FILE") }
    }

    func run() throws {
        let keys = try KeyFiles.publicKeys(inFile: to)
        guard keys.count == 1 else { throw CLIError(.usage, "'\(to)' holds \(keys.count) public keys; a package is for one") }
        let report = try FileLockPackage.seal(input, to: keys[0], output: output, replaceExisting: force)
        Console.summary("sealed \(Console.byteCount(report.contentBytes)) for \(KeyFiles.fingerprint(keys[0])) into \(report.output)")
    }
}

struct Unseal: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decrypt a FileLock package made for one of this machine's identities.",
        discussion: """
        Examples:
          n11archive unseal photo.jpg.filelock -o photo.jpg
          n11archive unseal doc.filelock -o doc.pdf --identity backup.key
        Nothing appears at OUT unless the package's tag verified: the plaintext goes to a \
        0600 temp file beside OUT, which is renamed into place only then. OUT is plaintext: \
        put it where only you can read it.
        """)

    @Argument(help: ArgumentHelp("The package.", valueName: "FILE"), completion: .file()) var input: String
    @Option(name: .short, help: ArgumentHelp("The plaintext file to write.", valueName: "OUT")) var output: String
    @Flag(help: "Replace OUT if it exists.") var force = false
    @OptionGroup var store: StoreOptions
    @OptionGroup var identity: IdentityOptions

    func validate() throws {
        if input == "-" { throw ValidationError("unseal reads a package file, not standard input ('-'); save it to a file first (a file named '-' is ./-)") }
        // The package is one AES-GCM message: its tag is checked after the last byte, and
        // nothing may be written before that, so the plaintext goes to a file, renamed into place.
        if output == "-" {
            throw ValidationError("unseal writes a file, not standard output (-o -): nothing is written before the package's tag verified; give -o FILE (a file named '-' is ./-)")
        }
    }

    func run() throws {
        let identities = try UnlockSources(password: nil, store: store, identity: identity).identities()
        let report = try FileLockPackage.unseal(input, identities: identities, output: output, replaceExisting: force)
        Console.summary("unsealed \(Console.byteCount(report.contentBytes)) into \(report.output)")
    }
}
