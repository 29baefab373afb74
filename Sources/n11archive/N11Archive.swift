import ArgumentParser

struct N11Archive: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "n11archive",
        abstract: "An encrypted vault of photos and notes, backed up to encrypted .nu11vlt archives.",
        discussion: """
        Examples:
          n11archive init
          n11archive vault add IMG_0001.jpg
          n11archive create --portable -o vault.nu11vlt
          n11archive restore vault.nu11vlt   # on another machine, with the password
        `n11archive COMMAND --help` shows each command's options and examples.
        Exit codes: 0 ok, 1 other failure, 3 partial (restore --salvage), 64 usage, 65 damaged or tampered data, 66 missing input, \
        73 output exists, 74 I/O error (disk full, read-only), 75 busy (locked), 77 wrong PIN or \
        password or missing key, 78 not initialised or unsafe permissions.
        """,
        version: "0.4.0",
        subcommands: [Init.self, VaultCommand.self, Create.self, Verify.self, ListArchive.self, Info.self, Restore.self, Prune.self,
                      PasswordCommand.self, KeyCommand.self, Seal.self, Unseal.self, Rekey.self, Archives.self, TextCommand.self])
}
