import Foundation
import Glibc
import Testing
import N11TestSupport

/// Item names come from archives and vaults others may have made. In human output every
/// control character is escaped, so a name cannot rewrite the terminal or forge a line;
/// `--json` carries the name exactly.
@Suite("Control characters in names never reach the terminal raw")
struct TerminalEscapeTests {
    /// ESC ] (set title) … BEL, a carriage return, a newline that would forge a line, DEL and
    /// the C1 CSI (U+009B).
    static let hostileName = "x\u{1B}]0;pwned\u{07}\r\nn11archive: ok\u{7F}\u{9B}2J.jpg"

    /// Fails if `bytes` hold a control character other than the newline ending each line.
    func expectNoRawControls(_ bytes: [UInt8], _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let text = String(decoding: bytes, as: UTF8.self)
        let controls = text.unicodeScalars.filter { ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) }
        #expect(controls.isEmpty, "\(what) printed raw controls \(controls.map { String($0.value, radix: 16) }): \(text.debugDescription)",
                sourceLocation: sourceLocation)
    }

    @Test("vault add, vault list, list and an error message escape them; --json keeps the exact name")
    func escapedInHumanOutputExactInJSON() throws {
        try withSandbox { s in
            try s.initialize()
            let file = try s.file(Self.hostileName, randomBytes(300))
            let added = try s.run(["vault", "add", file])
            expectExit(added, 0)
            expectNoRawControls(added.stdout + added.stderr, "vault add")
            #expect(added.out.contains("\\x1b]0;pwned\\x07\\x0d\\x0an11archive: ok\\x7f\\x9b2J.jpg"), "\(added)")

            let listed = try s.run(["vault", "list"])
            expectExit(listed, 0)
            expectNoRawControls(listed.stdout + listed.stderr, "vault list")
            #expect(try s.list().items.first?["name"] as? String == Self.hostileName)

            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            let archiveList = try s.run(["list", archive, "--password-file", pw])
            expectExit(archiveList, 0)
            expectNoRawControls(archiveList.stdout + archiveList.stderr, "list")
            let json = try jsonDocument(try s.run(["list", archive, "--password-file", pw, "--json"]))
            #expect((json["items"] as? [[String: Any]])?.first?["name"] as? String == Self.hostileName)

            // An error naming a path with such characters.
            let missing = try s.run(["vault", "add", s.path("gone\u{1B}[2J\u{9B}31m.jpg")])
            #expect(missing.status != 0)
            expectNoRawControls(missing.stdout + missing.stderr, "an error message")
            #expect(missing.err.contains("gone\\x1b[2J\\x9b31m.jpg"), "\(missing)")
        }
    }
}
