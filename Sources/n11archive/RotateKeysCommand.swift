import ArgumentParser
import Foundation
import N11Archiver
import N11Format
import N11System
import N11Vault

extension VaultCommand {
    /// Seed 001's key rotation: new compartment keys, every item sealed anew under them.
    struct RotateKeys: ParsableCommand, HasOutputOptions {
        static let configuration = CommandConfiguration(
            commandName: "rotate-keys",
            abstract: "Re-encrypt every item under new compartment keys; keep the old ones retired.",
            discussion: """
            Examples:
              n11archive vault rotate-keys
              n11archive vault rotate-keys --compartment backup
              n11archive vault rotate-keys --forget-retired
            Every item of the chosen compartments (default: all three) is sealed anew under \
            a new key, out of sight, and one journaled commit makes the new items and keys \
            current together: a crash at any moment leaves the old state or the new one. It \
            needs as much free space as those items take. The old keys are kept in the key \
            store, retired (never used to write), because secure archives made before the \
            rotation hold items sealed under them. --forget-retired forgets every retired \
            key of the chosen compartments after rotating: secure archives made before then \
            can no longer be restored with this key store. Portable and recipient archives \
            never need these keys.
            """)

        @OptionGroup var store: StoreOptions
        @OptionGroup var vaultOptions: VaultOptions
        @OptionGroup var outputOptions: OutputOptions

        @Option(help: ArgumentHelp("Rotate only this compartment (vault, fade or backup); repeatable.", valueName: "NAME"))
        var compartment: [Compartment] = []

        @Flag(name: .customLong("forget-retired"),
              help: "Afterwards, forget the retired keys of these compartments (older secure archives stop restoring).")
        var forgetRetired = false

        struct Document: Encodable {
            let outcome = "ok", command = "vault rotate-keys"
            let vault: String
            let compartments: [String]
            let items: [String: Int]
            let plaintextBytes: Int64
            let newKeyIds: [String: String]
            let retiredKeys: [String: [String]]
            let forgottenKeys: Int
            let durationSeconds: Double
        }

        func run() throws {
            let chosen = Set(compartment.isEmpty ? Compartment.allCases : compartment)
            let vault = try vaultOptions.open(with: store, forWriting: true)
            let rotation = try vault.rotateKeys(of: chosen, forgetRetired: forgetRetired,
                                                progress: outputOptions.observer("rotate"))
            let history = try vault.keyStore.keyHistory().filter { chosen.contains($0.compartment) }
            let names = rotation.compartments.map(\.rawValue)
            if outputOptions.json {
                try Console.json(Document(
                    vault: vault.path, compartments: names,
                    items: Dictionary(uniqueKeysWithValues: rotation.compartments.map { ($0.rawValue, rotation.items[$0] ?? 0) }),
                    plaintextBytes: rotation.bytes,
                    newKeyIds: Dictionary(uniqueKeysWithValues: rotation.newKeyIDs.map { ($0.key.rawValue, $0.value.hex) }),
                    retiredKeys: Dictionary(uniqueKeysWithValues: history.map { ($0.compartment.rawValue, $0.retired.map(\.hex)) }),
                    forgottenKeys: rotation.forgotten, durationSeconds: Output.durationSeconds))
                return
            }
            let count = rotation.items.values.reduce(0, +)
            Console.summary("rotated the \(names.joined(separator: ", ")) key(s) of \(vault.path): \(count) item(s), \(Console.byteCount(rotation.bytes)) sealed anew under new keys")
            if forgetRetired {
                Console.note("\(rotation.forgotten) retired key(s) forgotten: secure archives made before this rotation can no longer be restored with this key store")
            } else {
                let retired = history.reduce(0) { $0 + $1.retired.count }
                Console.note("\(retired) retired key(s) kept in \(vault.keyStore.path) (never used to write): secure archives made before this rotation need them to restore; `n11archive vault rotate-keys --forget-retired` forgets them")
            }
        }
    }
}
