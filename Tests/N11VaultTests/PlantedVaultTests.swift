import Foundation
import Glibc
import Testing
import N11TestSupport
@testable import N11Vault
import N11Format
import N11System

/// A vault is a place only its user may change (DESIGN.md §3.8, issue 25 finding 1): another
/// user who made its directory, or can write to it, could swap in a catalogue whose pending
/// steps remove or replace the victim's files through links. The tests run as root and play
/// the other user with uid 65534.
@Suite("A vault another user could change is refused; pending steps only act on the vault's layout")
struct PlantedVaultTests {
    static let other: uid_t = 65534

    @Test("init into an empty directory another user made (0777) is refused, and nothing is created in it")
    func foreignEmptyDirectory() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let shared = dir + "/shared-vault"
            #expect(mkdir(shared, 0o777) == 0 && chmod(shared, 0o777) == 0 && chown(shared, Self.other, Self.other) == 0)
            let error = expectVaultError("unsafePermissions") {
                _ = try Vault.open(at: shared, keyStore: store, forWriting: true)
            }
            #expect(error?.description.contains("uid 65534") == true, "\(String(describing: error))")
            #expect(listing(of: shared).isEmpty, "not even the lock file")
        }
    }

    @Test("a vault whose directory, item folder, catalogue or marker others can change is refused to writers and readers",
          arguments: ["", "/Photos", "/Notes", "/Catalogue.sqlite", "/.n11vault"])
    func openToOthers(part: String) throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = dir + "/vault"
            _ = try Vault.open(at: vault, keyStore: store, forWriting: true).add(photo([1, 2, 3]))
            var status = stat()
            #expect(stat(vault + part, &status) == 0)
            #expect(chmod(vault + part, (status.st_mode & 0o777) | 0o022) == 0)
            for forWriting in [true, false] {
                let error = expectVaultError("unsafePermissions") {
                    _ = try Vault.open(at: vault, keyStore: store, forWriting: forWriting)
                }
                #expect(error?.description.contains("chmod go-w '\(vault + part)'") == true, "\(String(describing: error))")
            }
            #expect(chmod(vault + part, status.st_mode & 0o777) == 0)
            #expect(chown(vault + part, Self.other, Self.other) == 0)
            expectVaultError("unsafePermissions") { _ = try Vault.open(at: vault, keyStore: store, forWriting: true) }
            #expect(chown(vault + part, geteuid(), getegid()) == 0)
            #expect(try Vault.open(at: vault, keyStore: store, forWriting: true).items().count == 1)
        }
    }

    @Test("a vault below a directory others can write without the sticky bit is refused to writers (they could swap it)")
    func unsafeAncestor() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let shared = dir + "/group-folder"
            #expect(mkdir(shared, 0o777) == 0 && chmod(shared, 0o777) == 0)
            let error = expectVaultError("unsafePermissions") {
                _ = try Vault.open(at: shared + "/vault", keyStore: store, forWriting: true)
            }
            #expect(error?.description.contains("above your vault") == true, "\(String(describing: error))")
            #expect(listing(of: shared).isEmpty)
            expectVaultError("unsafePermissions") { try Vault.checkCanCreateOrOpen(at: shared + "/new/vault") }
            #expect(chmod(shared, 0o1777) == 0)   // sticky, as /tmp: nobody can rename another's entry
            try Vault.checkCanCreateOrOpen(at: shared + "/vault")
            #expect(try Vault.open(at: shared + "/vault", keyStore: store, forWriting: true).items().isEmpty)
        }
    }

    @Test("a committed v1 journal with a step of another shape stops the migration and stays for a person to look at")
    func refusedVersion1Journal() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = dir + "/vault"
            _ = try Vault.open(at: vault, keyStore: store, forWriting: true).add(photo([1, 2, 3]))
            try TestCatalogue.downgradeToVersion1(vault)
            let staging = vault + "/.n11staging-0123456789ab"
            #expect(mkdir(staging, 0o700) == 0)
            try writeBytes(Array("remove L/secret.txt\n".utf8), to: staging + "/commit")
            expectVaultError("catalogueDamaged") { _ = try Vault.open(at: vault, keyStore: store, forWriting: true) }
            #expect(exists(staging + "/commit") && exists(vault + "/Meta"), "the journal and the v1 layout stay")
        }
    }

    @Test("a link in place of Photos/ is refused, not followed")
    func linkedItemFolder() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = dir + "/vault"
            _ = try Vault.open(at: vault, keyStore: store, forWriting: true)
            let elsewhere = dir + "/private"
            #expect(mkdir(elsewhere, 0o700) == 0)
            #expect(rmdir(vault + "/Photos") == 0 && symlink(elsewhere, vault + "/Photos") == 0)
            for forWriting in [true, false] {
                expectVaultError("unsafePermissions") { _ = try Vault.open(at: vault, keyStore: store, forWriting: forWriting) }
            }
        }
    }

    @Test("pending steps of any shape but the ones the code writes are refused: the planted catalogue of the review")
    func plantedSteps() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = dir + "/vault"
            let item = try Vault.open(at: vault, keyStore: store, forWriting: true).add(photo([1, 2, 3]))
            // The victim's private directory, reached through a link inside the vault.
            let privateDirectory = dir + "/private"
            #expect(mkdir(privateDirectory, 0o700) == 0)
            try writeBytes(Array("secret".utf8), to: privateDirectory + "/secret.txt")
            #expect(symlink(privateDirectory, vault + "/L") == 0)
            try TestCatalogue.addPending(["remove L/secret.txt"], in: vault)

            let error = expectVaultError("catalogueDamaged") { _ = try Vault.open(at: vault, keyStore: store, forWriting: true) }
            #expect(error?.description.contains("pending step") == true, "\(String(describing: error))")
            #expect(exists(privateDirectory + "/secret.txt"), "nothing was removed through the link")
            #expect(exists(vault + "/" + item.relativePath))
        }
    }

    @Test("step shapes: the code's own are read back; anything that could name another place is not")
    func stepShapes() throws {
        let id = "0F8FAD5B-D9CB-469F-A165-70867728950E"
        let staging = ".n11staging-0123456789ab"
        let accepted = ["move \(staging)/\(id).n11.content Photos/\(id).n11",
                        "move \(staging)/\(id).n11note.content Notes/\(id).n11note",
                        "move \(staging)/\(id).meta Meta/\(id).n11meta",        // a v1 journal
                        "move \(staging)/marker .n11vault",
                        "remove Photos/\(id).n11", "remove Notes/\(id).n11note", "remove Meta/\(id).n11meta",
                        "finish-migration"]
        for line in accepted { #expect(VaultStaging.Operation(line: Substring(line))?.line == line, "\(line)") }
        let refused = ["remove L/secret.txt", "remove Photos/../L/secret.txt", "remove /etc/passwd",
                       "remove Photos/\(id.lowercased()).n11", "remove Photos/\(id).n11note", "remove .n11vault",
                       "remove Photos/x/\(id).n11", "remove Photos", "remove \(staging)/\(id).n11.content",
                       "move \(staging)/payload L/.bashrc", "move L/\(id).n11.content Photos/\(id).n11",
                       "move \(staging)/\(id).n11.content L/.bashrc", "move \(staging)/marker Photos/\(id).n11",
                       "move \(staging)/\(id).n11.content .n11vault", "move .n11staging-../\(id).content Photos/\(id).n11",
                       "move .n11staging-0123/\(id).content Photos/\(id).n11",
                       "move Photos/\(id).n11 Notes/\(id).n11note"]
        for line in refused { #expect(VaultStaging.Operation(line: Substring(line)) == nil, "\(line)") }
    }

    @Test("a step never removes or writes through a link planted in place of an item folder or a staging directory")
    func stepsDoNotFollowLinks() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = dir + "/vault"
            _ = try Vault.open(at: vault, keyStore: store, forWriting: true)
            let id = "0F8FAD5B-D9CB-469F-A165-70867728950E"
            let victim = dir + "/victim"
            #expect(mkdir(victim, 0o700) == 0)
            try writeBytes([7], to: victim + "/\(id).n11")
            #expect(rmdir(vault + "/Photos") == 0 && symlink(victim, vault + "/Photos") == 0)
            #expect(throws: SystemError.self) {
                try VaultStaging.apply([.remove("Photos/\(id).n11")], in: vault, keyStore: store)
            }
            #expect(exists(victim + "/\(id).n11"))

            // A staging directory that is a link: nothing is moved out of it.
            #expect(unlink(vault + "/Photos") == 0 && mkdir(vault + "/Photos", 0o700) == 0)
            try writeBytes([8], to: victim + "/\(id).n11.content")
            #expect(symlink(victim, vault + "/.n11staging-0123456789ab") == 0)
            #expect(throws: SystemError.self) {
                try VaultStaging.apply([.move(staged: ".n11staging-0123456789ab/\(id).n11.content", to: "Photos/\(id).n11")],
                                       in: vault, keyStore: store)
            }
            #expect(exists(victim + "/\(id).n11.content") && !exists(vault + "/Photos/\(id).n11"))
        }
    }
}
