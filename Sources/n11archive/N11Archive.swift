import ArgumentParser

struct N11Archive: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "n11archive",
        abstract: "An encrypted vault of photos and notes, backed up to encrypted .nu11vlt archives.",
        discussion: """
        Start with `n11archive init`, add items with `n11archive vault add`.
        Exit codes: 0 ok, 1 other failure, 64 usage, 65 damaged or tampered data, 66 missing input,
        73 output exists, 74 I/O error (disk full, read-only), 75 busy (locked), 77 wrong PIN or
        password or missing key, 78 not initialised or unsafe permissions.
        """,
        version: "0.1.0",
        subcommands: [Init.self, VaultCommand.self, Create.self, Verify.self, ListArchive.self, Info.self, Restore.self, Prune.self])
}
