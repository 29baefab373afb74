import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11System
import N11Vault

struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Identities (archives this machine can write but not read), the signing key and trusted signers.",
        discussion: """
        Examples:
          n11archive key generate                      # an identity in the key store
          n11archive key export-public -o backup.pub   # share this
          n11archive key export-private -o backup.key  # passphrase-protected
          n11archive key import backup.key             # where you restore
          n11archive create --portable --recipient backup.pub -o a.nu11vlt
          n11archive key export-public --signing -o signer.pub  # the signing key
          n11archive key trust signer.pub    # where you restore: only its archives
          n11archive key backup -o keys.n11backup      # every key
        Archives made for a public key open with its private key: from the key store, or \
        with `restore --identity FILE`. Keep the private key off the machine that makes \
        the nightly archives, and keep a copy of it: without it those archives cannot be restored. \
        Every archive a home with a signing key creates is signed (`init` makes one); where \
        a signer is trusted, restore, verify, list and rekey refuse archives it did not sign, \
        and prune and archives never count them.
        """,
        subcommands: [Generate.self, ExportPublic.self, ExportPrivate.self, Import.self, List.self,
                      Trust.self, Untrust.self, SetPIN.self, RemovePIN.self, Backup.self, RestoreBackup.self],
        aliases: ["keys"])

    /// Picks one identity of the key store: the one whose fingerprint starts with `prefix`,
    /// or the only one.
    static func choose(_ store: KeyStore, _ prefix: String?) throws -> P256PrivateKey {
        let identities = store.identities
        guard !identities.isEmpty else {
            throw CLIError(.missingInput, "the key store '\(store.path)' holds no identity",
                           hint: "make one with `n11archive key generate`, or bring one with `n11archive key import FILE`")
        }
        if let prefix {
            let matching = identities.filter { KeyFiles.fingerprint($0.publicKey).hasPrefix(prefix.lowercased()) }
            guard matching.count == 1 else {
                throw CLIError(.usage, matching.isEmpty ? "no identity's fingerprint starts with '\(prefix)'" : "'\(prefix)' matches \(matching.count) identities",
                               hint: "`n11archive key list` shows the fingerprints")
            }
            return matching[0]
        }
        guard identities.count == 1 else {
            throw CLIError(.usage, "the key store holds \(identities.count) identities", hint: "choose one with --fingerprint (see `n11archive key list`)")
        }
        return identities[0]
    }
}

extension KeyCommand {
    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a P-256 identity, or (--signing) an Ed25519 signing key, in the key store (sealed by its PIN, if it has one).",
            discussion: """
            Examples:
              n11archive key generate && n11archive key export-public -o backup.pub
              n11archive key generate --signing     # a home made before signing existed
            A key store holds one generated identity and one signing key; a second is \
            refused (imported identities are kept beside it). Once a home has a signing \
            key, every archive it creates is signed with it.
            """)

        @OptionGroup var store: StoreOptions
        @Flag(help: "Make the home's Ed25519 signing key instead of an identity.") var signing = false

        func run() throws {
            let keyStore = try store.loadKeyStore()
            if signing {
                if let existing = keyStore.signingKey {
                    throw CLIError(.outputExists, "the key store already holds signing key \(SignerKeyFiles.fingerprint(existing.publicKey))",
                                   hint: "export its public key with `n11archive key export-public --signing`")
                }
                let made = try Ed25519SigningKey.generate()
                let key = try keyStore.addSigningKey(made)
                guard key.publicKey == made.publicKey else {
                    // Another process made one meanwhile: that one is the home's.
                    throw CLIError(.outputExists, "the key store already holds signing key \(SignerKeyFiles.fingerprint(key.publicKey))",
                                   hint: "export its public key with `n11archive key export-public --signing`")
                }
                Console.out("generated signing key \(SignerKeyFiles.fingerprint(key.publicKey)) in \(keyStore.path): archives created here are signed with it")
                Console.note("trust it where you restore: `n11archive key trust --own` here, or `key export-public --signing -o FILE` and `key trust FILE` elsewhere")
                return
            }
            if let existing = keyStore.identities.first {
                throw CLIError(.outputExists, "the key store already holds identity \(KeyFiles.fingerprint(existing.publicKey))",
                               hint: "export its public key with `n11archive key export-public`")
            }
            let key = try P256PrivateKey.generate()
            try keyStore.addIdentity(key)
            Console.out("generated identity \(KeyFiles.fingerprint(key.publicKey)) in \(keyStore.path)")
            Console.note("share its public key with `n11archive key export-public -o FILE`; back the private key up with `n11archive key export-private -o FILE`")
        }
    }

    struct ExportPublic: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export-public",
            abstract: "Write an identity's public key (FileLock's PEM form unless --standard).",
            discussion: """
            Examples:
              n11archive key export-public                  # to standard output
              n11archive key export-public -o backup.pub
              n11archive key export-public --standard -o spki.pem
              n11archive key export-public --from backup.key -o backup.pub
            FileLock's form is a PUBLIC KEY block holding the raw 65-byte point; \
            --standard writes a SubjectPublicKeyInfo. Every n11archive command reads both.
            """)

        @OptionGroup var store: StoreOptions
        @Option(name: .customLong("from"),
                help: ArgumentHelp("Take the identity from this private key file (as `key export-private` writes it) instead of the key store.", valueName: "FILE"),
                completion: .file())
        var from: String?
        @OptionGroup var passphrase: PassphraseOptions
        @Option(name: .short, help: ArgumentHelp("Write to FILE (never replacing one) instead of standard output.", valueName: "FILE"), completion: .file())
        var output: String?
        @Flag(help: "Write a standard SubjectPublicKeyInfo PEM instead of FileLock's raw point.") var standard = false
        @Option(help: ArgumentHelp("Which identity, by fingerprint prefix (when the key store holds several).", valueName: "HEX"))
        var fingerprint: String?

        @Flag(help: "Write the home's Ed25519 signing key's public half (SubjectPublicKeyInfo PEM), for `key trust` and --signed-by.")
        var signing = false

        func validate() throws {
            if from != nil && fingerprint != nil { throw ValidationError("--fingerprint picks among the key store's identities; it cannot go with --from") }
            if signing && (from != nil || fingerprint != nil || standard) {
                throw ValidationError("--signing writes the home's one signing key, always as a standard PEM: drop --from, --fingerprint and --standard")
            }
        }

        func run() throws {
            if signing { return try exportSigner() }
            let key: P256PublicKey
            if let from {
                // After a disaster the identity may be only in its file: no import needed.
                key = try KeyFiles.identity(inFile: from) { try passphrase.read(for: from, confirm: false) }.publicKey
            } else {
                key = try KeyCommand.choose(try store.loadKeyStore(), fingerprint).publicKey
            }
            let text = standard ? KeyFiles.standardPEM(key) : KeyFiles.fileLockPEM(key)
            guard let output else {
                for line in text.split(separator: "\n") { Console.out(String(line)) }
                return
            }
            try KeyFiles.writeNew(text, to: output, mode: 0o644)
            Console.note("wrote public key \(KeyFiles.fingerprint(key)) to \(output)")
        }

        private func exportSigner() throws {
            let keyStore = try store.loadKeyStore()
            guard let key = keyStore.signingKey?.publicKey else {
                throw CLIError(.missingInput, "the key store '\(keyStore.path)' holds no signing key", hint: "make one with `n11archive key generate --signing`")
            }
            let text = SignerKeyFiles.pem(key)
            guard let output else {
                for line in text.split(separator: "\n") { Console.out(String(line)) }
                return
            }
            try KeyFiles.writeNew(text, to: output, mode: 0o644)
            Console.note("wrote signing key \(SignerKeyFiles.fingerprint(key))'s public half to \(output); `n11archive key trust \(output)` where you restore")
        }
    }

    struct ExportPrivate: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export-private",
            abstract: "Write an identity's private key as passphrase-protected PKCS#8 PEM (mode 0600).",
            discussion: """
            Examples:
              n11archive key export-private -o backup.key   # asks twice
              n11archive key export-private -o backup.key --passphrase-file pp
            PBES2: PBKDF2-HMAC-SHA256 (600,000 iterations) and AES-256-CBC, which \
            `openssl pkey` and Python's `cryptography` also read. Never replaces a file.
            """)

        @OptionGroup var store: StoreOptions
        @OptionGroup var passphrase: PassphraseOptions
        @Option(name: .short, help: ArgumentHelp("The file to write (required; never replaced).", valueName: "FILE"), completion: .file())
        var output: String
        @Option(help: ArgumentHelp("Which identity, by fingerprint prefix.", valueName: "HEX"))
        var fingerprint: String?

        func run() throws {
            if try FileStatus.of(output) != nil { throw ArchiveError.outputExists(path: output) }
            let key = try KeyCommand.choose(try store.loadKeyStore(), fingerprint)
            let secret = try passphrase.read(for: output, confirm: true, pemKey: true)
            let pem = try key.encryptedPKCS8PEM(passphrase: secret)
            try KeyFiles.writeNew(String(decoding: pem, as: UTF8.self), to: output, mode: 0o600)
            Console.note("wrote private key \(KeyFiles.fingerprint(key.publicKey)) to \(output) (0600); keep it and its passphrase apart")
        }
    }

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a P-256 private key (PEM: PKCS#8, encrypted or not, or SEC1) to the key store.",
            discussion: """
            Example:
              n11archive key import backup.key    # asks for its passphrase
            """)

        @OptionGroup var store: StoreOptions
        @OptionGroup var passphrase: PassphraseOptions
        @Argument(help: ArgumentHelp("The private key file.", valueName: "FILE"), completion: .file()) var file: String

        func run() throws {
            let key = try KeyFiles.identity(inFile: file) { try passphrase.read(for: file, confirm: false) }
            let keyStore = try store.loadKeyStore()
            let added = try keyStore.addIdentity(key)
            Console.out("\(added ? "imported" : "already held:") identity \(KeyFiles.fingerprint(key.publicKey)) into \(keyStore.path)")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the key store's identities, signing key and trusted signers by fingerprint (or its compartment keys by ID).",
            discussion: """
            Examples:
              n11archive key list
              n11archive key list --compartment-keys
            One line per identity (its fingerprint), then `signing FINGERPRINT` for the \
            home's signing key and `trusted FINGERPRINT` for each trusted signer (`key \
            trust`). With --compartment-keys, one line per compartment key: the compartment, its \
            state (current; retired by `vault rotate-keys`, kept for older secure archives; \
            forgotten, of which only the ID is kept; pending, made by a rotation that did not \
            commit) and its ID, which secure archives' manifests name.
            """)

        @OptionGroup var store: StoreOptions

        @Flag(name: .customLong("compartment-keys"), help: "List the vault, fade and backup keys by ID and state instead.")
        var compartmentKeys = false

        func run() throws {
            let keyStore = try store.loadKeyStore()
            if compartmentKeys {
                for ring in try keyStore.keyHistory() {
                    let name = ring.compartment.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0)
                    Console.out("\(name) current    \(ring.current.hex)")
                    for id in ring.retired.reversed() { Console.out("\(name) retired    \(id.hex)") }
                    if let id = ring.pending { Console.out("\(name) pending    \(id.hex)") }
                    for id in ring.forgotten.reversed() { Console.out("\(name) forgotten  \(id.hex)") }
                }
                return
            }
            if keyStore.identities.isEmpty { Console.note("no identities; make one with `n11archive key generate`") }
            for key in keyStore.identities { Console.out(KeyFiles.fingerprint(key.publicKey)) }
            if let signer = keyStore.signingKey?.publicKey { Console.out("signing  \(SignerKeyFiles.fingerprint(signer))") }
            for key in try TrustedSigners.keys(in: store.resolvedHome) { Console.out("trusted  \(SignerKeyFiles.fingerprint(key))") }
        }
    }

    struct Trust: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Trust a signer: from then on restore, verify, list and rekey refuse archives no trusted key signed, and prune and archives never count them.",
            discussion: """
            Examples:
              n11archive key trust --own                # this home's own signing key
              n11archive key trust server-signer.pub    # another machine's signing key
            Kept in HOME/trusted-signers.pem (public keys, 0600), which `key backup` \
            carries; --signed-by FILE replaces it for one command, --no-signer-check turns \
            the rule off for one command.
            """)

        @OptionGroup var store: StoreOptions
        @Flag(help: "Trust this home's own signing key.") var own = false
        @Argument(help: ArgumentHelp("A file of Ed25519 public keys (PEM, or 64 hex digits a line).", valueName: "FILE"), completion: .file())
        var file: String?

        func validate() throws {
            if own && file != nil { throw ValidationError("give a key file or --own (this home's signing key), not both") }
            guard own || file != nil else { throw ValidationError("give a key file (`key export-public --signing` writes one), or --own for this home's signing key") }
        }

        func run() throws {
            let home = store.resolvedHome
            let keys: [Ed25519PublicKey]
            if let file {
                keys = try SignerKeyFiles.keys(inFile: file)
            } else {
                let keyStore = try store.loadKeyStore()
                guard let signer = keyStore.signingKey?.publicKey else {
                    throw CLIError(.missingInput, "the key store '\(keyStore.path)' holds no signing key", hint: "make one with `n11archive key generate --signing`")
                }
                keys = [signer]
            }
            let ruleWasOff = try TrustedSigners.keys(in: home).isEmpty
            for key in keys {
                let added = try TrustedSigners.add(key, in: home)
                Console.out("\(added ? "trusted" : "already trusted:") signer \(SignerKeyFiles.fingerprint(key))")
            }
            // The first trusted key turns the rule on for every archive read here, this home's
            // own too: a new user trusted a friend's key and was locked out of their own.
            if ruleWasOff && file != nil {
                Console.note("from now on only archives signed by a trusted key are read here, this home's own included: `n11archive key trust --own` adds its key")
            }
        }
    }

    struct Untrust: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop trusting a signer (by fingerprint prefix, as `key list` shows it).",
            discussion: """
            Example:
              n11archive key untrust 3f2a9c
            With no trusted signer left, archives are read whoever signed them, as before. \
            --signed-by FILE still trusts a key for one command.
            """)

        @OptionGroup var store: StoreOptions
        @Argument(help: ArgumentHelp("The signer's fingerprint or its first hex digits (4 or more).", valueName: "HEX")) var fingerprint: String

        func validate() throws {
            // An empty or short prefix would match any signer: `key untrust "$FPR"` with an
            // unset variable must not quietly turn the rule off.
            guard fingerprint.count >= 4, fingerprint.allSatisfy(\.isHexDigit) else {
                throw ValidationError("give the signer's fingerprint, or at least its first 4 hex digits (`n11archive key list` shows them)")
            }
        }

        func run() throws {
            let home = store.resolvedHome
            let matching = try TrustedSigners.keys(in: home).filter { SignerKeyFiles.fingerprint($0).hasPrefix(fingerprint.lowercased()) }
            guard matching.count == 1 else {
                throw CLIError(matching.isEmpty ? .missingInput : .usage,
                               matching.isEmpty ? "no trusted signer's fingerprint starts with '\(fingerprint)'" : "'\(fingerprint)' matches \(matching.count) trusted signers",
                               hint: "`n11archive key list` shows them")
            }
            _ = try TrustedSigners.remove(matching: SignerKeyFiles.fingerprint(matching[0]), in: home)
            Console.out("no longer trusted: signer \(SignerKeyFiles.fingerprint(matching[0]))")
            if try TrustedSigners.keys(in: home).isEmpty { Console.note("no trusted signer is left: archives are read whoever signed them") }
        }
    }

    /// Where a new PIN comes from: --new-pin-file/--new-pin-fd, else the terminal (twice).
    struct NewPINOptions: ParsableArguments {
        @Option(name: .customLong("new-pin-file"), help: ArgumentHelp("Read the new PIN from the first line of FILE.", valueName: "FILE"), completion: .file())
        var newPINFile: String?
        @Option(name: .customLong("new-pin-fd"), help: ArgumentHelp("Read the new PIN from file descriptor N.", valueName: "N"))
        var newPINFD: Int32?

        var given: Bool { newPINFile != nil || newPINFD != nil }

        func read() throws -> SecureBytes {
            guard let source = SecretSource.choose(file: newPINFile, descriptor: newPINFD, environmentFile: "N11_NEW_PIN_FILE") else {
                throw CLIError(.usage, "no terminal to ask for the new PIN", hint: "give it with --new-pin-file FILE or --new-pin-fd N")
            }
            return try source.read(what: "new PIN", confirm: true, accept: { try KeyStore.checkPIN($0) })
        }
    }

    struct SetPIN: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-pin",
            abstract: "Seal the key store under a new PIN (adding one, or changing the current one).",
            discussion: """
            Examples:
              n11archive key set-pin          # asks for the new PIN twice
              n11archive key set-pin --pin-file old --new-pin-file new
            A cron job that needs the key store then needs the PIN too (--pin-file): \
            prefer archives for recipients, which need no key store secret to write.
            """)

        @OptionGroup var store: StoreOptions
        @OptionGroup var newPIN: NewPINOptions

        func run() throws {
            let keyStore = try store.loadKeyStore()
            // A current PIN given for a key store that has none is not read: said, so that a
            // wrong or missing file there is not taken for one that worked.
            if !keyStore.isPINProtected, store.pinFile != nil || store.pinFD != nil {
                Console.note("the key store had no PIN, so the current PIN (--pin-file/--pin-fd) was not read")
            }
            try keyStore.changePIN(to: try newPIN.read())
            Console.out("sealed \(keyStore.path) under the new PIN")
        }
    }

    struct RemovePIN: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove-pin",
            abstract: "Store the key store without a PIN (it stays 0600 in a 0700 directory).",
            discussion: "Example:\n  n11archive key remove-pin    # asks for the current PIN")

        @OptionGroup var store: StoreOptions

        func run() throws {
            let keyStore = try store.loadKeyStore()
            guard keyStore.isPINProtected else { throw CLIError(.usage, "the key store '\(keyStore.path)' has no PIN") }
            try keyStore.changePIN(to: nil)
            Console.out("removed the PIN of \(keyStore.path)")
        }
    }

    struct Backup: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write every key (vault, fade, backup, secure archives' device keys, identities, the signing key) and the trusted signers to a file under a passphrase.",
            discussion: """
            Examples:
              n11archive key backup -o keys.n11backup
              n11archive key restore keys.n11backup      # on a new machine
            Keep it away from the machine, with its passphrase apart: it opens everything this \
            key store opens. Each secure archive adds a device key, so make a new backup after \
            making secure archives you want to keep. Sealed as a PIN seals the key store \
            (Argon2id, 256 MiB, 3 passes); 0600; never replaces a file.
            """)

        @OptionGroup var store: StoreOptions
        @OptionGroup var passphrase: PassphraseOptions
        @Option(name: .short, help: ArgumentHelp("The backup file to write.", valueName: "FILE"), completion: .file()) var output: String

        func run() throws {
            if try FileStatus.of(output) != nil { throw ArchiveError.outputExists(path: output) }
            let keyStore = try store.loadKeyStore()
            let secret = try passphrase.read(for: output, confirm: true)
            let trusted = try TrustedSigners.keys(in: store.resolvedHome)
            try keyStore.writeBackup(to: output, passphrase: secret, trustedSigners: trusted)
            Console.out("wrote every key of \(keyStore.path) to \(output) (0600): \(keyStore.archiveKeyCount) secure archive key(s), \(keyStore.identities.count) identit\(keyStore.identities.count == 1 ? "y" : "ies"), \(keyStore.signingKey == nil ? "no" : "the") signing key, \(trusted.count) trusted signer(s)")
        }
    }

    struct RestoreBackup: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "restore",
            abstract: "Make this home's key store from a `key backup` file.",
            discussion: """
            Examples:
              n11archive key restore keys.n11backup
              n11archive key restore keys.n11backup --pin    # and seal it under a new PIN
            Refuses to replace an existing key store.
            """)

        @OptionGroup var store: StoreOptions
        @OptionGroup var passphrase: PassphraseOptions
        @OptionGroup var newPIN: NewPINOptions
        @Argument(help: ArgumentHelp("The backup file.", valueName: "FILE"), completion: .file()) var file: String
        @Flag(help: "Seal the restored key store under a new PIN.") var pin = false

        func run() throws {
            let home = store.resolvedHome
            if ((try? FileStatus.of(home.keyStorePath)) ?? nil) != nil { throw VaultError.alreadyInitialized(path: home.keyStorePath) }
            guard ((try? FileStatus.of(file)) ?? nil) != nil else { throw VaultError.inputMissing(path: file) }
            let secret = try passphrase.read(for: file, confirm: false)
            let pinBytes = pin || newPIN.given ? try newPIN.read() : nil
            let restored = try KeyStore.restoreBackup(from: file, passphrase: secret, into: home, pin: pinBytes)
            // The trusted signers come back too (added to any the home lists already).
            for key in restored.trustedSignersInBackup { try TrustedSigners.add(key, in: home) }
            Console.out("restored \(restored.path)\(restored.isPINProtected ? " (PIN-protected)" : ""): \(restored.archiveKeyCount) secure archive key(s), \(restored.identities.count) identit\(restored.identities.count == 1 ? "y" : "ies"), \(restored.signingKey == nil ? "no" : "the") signing key, \(restored.trustedSignersInBackup.count) trusted signer(s)")
        }
    }
}
