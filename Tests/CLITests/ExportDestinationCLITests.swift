import Foundation
import Glibc
import Testing
import N11TestSupport

@Suite("restore --export into an unsafe directory")
struct ExportDestinationCLITests {
    @Test("a linked export directory is refused (78) before the password is asked, with or without a trailing slash")
    func refusedBeforePassword() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            let victim = s.path("victim")
            #expect(mkdir(victim, 0o700) == 0 && symlink(victim, s.path("out")) == 0)
            let mark = s.path("asked")
            for target in [s.path("out"), s.path("out") + "/"] {
                let refused = try s.run(["restore", archive, "--export", target, "--password-command", "touch '\(mark)'; cat '\(pw)'"])
                expectExit(refused, 78)
                #expect(refused.err.contains("symbolic link") && refused.err.contains("nothing was exported"), "\(refused)")
                #expect(!exists(mark), "the password was asked for first")
                #expect(listing(of: victim).isEmpty)
            }
        }
    }
}
