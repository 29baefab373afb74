import Foundation
import Testing
import N11TestSupport

// `text encrypt|decrypt` (Ciphio's messages, seed 002) against an independent Python
// implementation (Scripts/ciphio-text.py, written from the seed with `cryptography`).

@Suite("n11archive CLI: Ciphio text messages")
struct TextCLITests {
    @Test("every algorithm round-trips both ways with the independent implementation; cbc and ctr are warned about",
          .enabled(if: SealCLITests.pythonAvailable, "needs python3 with cryptography"))
    func interoperates() throws {
        try withSandbox { s in
            let pw = try s.passwordFile()
            let text = Array("Wi-Fi at the cabin: correct-horse, ünïcödé\n".utf8)
            for algorithm in ["gcm", "cbc", "ctr"] {
                let ours = try s.run(["text", "encrypt", "--algorithm", algorithm, "--password-file", pw], stdin: text)
                expectExit(ours, 0)
                #expect(ours.out.hasPrefix(algorithm + ":"), "\(ours)")
                #expect(ours.err.contains("not authenticated") == (algorithm != "gcm"), "\(ours)")
                let message = try s.file("ours-\(algorithm).txt", ours.stdout)
                let back = s.path("back-\(algorithm)")
                let script = "python3 \(packageRoot)/Scripts/ciphio-text.py decrypt '\(pw)' < '\(message)' > '\(back)'"
                #expect(TinyFileSystem.shell(script) == 0)
                #expect(try readBytes(back) == text, "\(algorithm): Python read ours")

                let theirs = s.path("theirs-\(algorithm).txt")
                let input = try s.file("plain-\(algorithm).txt", text)
                #expect(TinyFileSystem.shell("python3 \(packageRoot)/Scripts/ciphio-text.py encrypt \(algorithm) '\(pw)' < '\(input)' > '\(theirs)'") == 0)
                let opened = try s.run(["text", "decrypt", theirs, "--password-file", pw])
                expectExit(opened, 0)
                #expect(opened.stdout == text, "\(algorithm): we read Python's")
            }
            // Without a prefix a message is gcm.
            let gcm = String(decoding: try readBytes(s.path("ours-gcm.txt")), as: UTF8.self)
            let bare = try s.file("bare.txt", Array(gcm.dropFirst(4).utf8))
            #expect(try s.run(["text", "decrypt", bare, "--password-file", pw]).stdout == text)
        }
    }

    @Test("bad base64, an unknown prefix, a wrong password, a changed or truncated message: a clear error, a documented code, nothing on stdout")
    func refusals() throws {
        try withSandbox { s in
            let pw = try s.passwordFile()
            let made = try s.run(["text", "encrypt", "--password-file", pw], stdin: Array("secret note\n".utf8))
            expectExit(made, 0)
            let message = String(decoding: made.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            let wrong = try s.passwordFile("not the password at all\n", name: "wrong")
            var flipped = Array(Data(base64Encoded: String(message.dropFirst(4)))!)
            flipped[flipped.count - 3] ^= 1
            let cases: [(String, String, Int32, String)] = [
                ("bad base64", "gcm:not*base64", 65, "not base64"),
                ("unknown prefix", "aes:" + message.dropFirst(4), 65, "is not an algorithm"),
                ("truncated", "gcm:" + Data(Array(Data(base64Encoded: String(message.dropFirst(4)))!.prefix(20))).base64EncodedString(), 65, "too short"),
                ("changed", "gcm:" + Data(flipped).base64EncodedString(), 77, "does not open"),
            ]
            for (what, text, code, words) in cases {
                let result = try s.run(["text", "decrypt", "--password-file", pw], stdin: Array(text.utf8))
                expectExit(result, code)
                #expect(result.err.contains(words), "\(what): \(result)")
                #expect(result.stdout.isEmpty, "\(what)")
            }
            let wrongPassword = try s.run(["text", "decrypt", "--password-file", wrong], stdin: made.stdout)
            expectExit(wrongPassword, 77)
            #expect(wrongPassword.stdout.isEmpty)
            expectExit(try s.run(["text", "encrypt", "--algorithm", "ecb", "--password-file", pw], stdin: [1]), 64)
            expectExit(try s.run(["text", "decrypt", s.path("missing.txt"), "--password-file", pw]), 66)
        }
    }

    @Test("vault add --note --from-ciphio decrypts messages into sealed notes, all or nothing; the plaintext is nowhere on disk")
    func fromCiphio() throws {
        try withSandbox { s in
            try s.initialize()
            let pw = try s.passwordFile()
            let marker = "plaintext-marker-7f3a9c from the phone"
            let good = try s.file("good.txt", try s.run(["text", "encrypt", "--password-file", pw], stdin: Array(marker.utf8)).stdout)
            let other = try s.passwordFile("some other long password\n", name: "other")
            let foreign = try s.file("foreign.txt", try s.run(["text", "encrypt", "--password-file", other], stdin: Array("x".utf8)).stdout)
            // One message does not open: nothing is added.
            let mixed = try s.run(["vault", "add", "--note", "--from-ciphio", good, foreign, "--password-file", pw])
            expectExit(mixed, 77)
            #expect(try s.list().items.isEmpty)
            let added = try s.run(["vault", "add", "--note", "--from-ciphio", good, "--password-file", pw])
            expectExit(added, 0)
            let id = try #require(addedLines(added).first?.id)
            #expect(try s.run(["vault", "cat", id]).out == marker)
            for (path, bytes) in s.tree(s.home) {
                #expect(!String(decoding: bytes, as: UTF8.self).contains("plaintext-marker-7f3a9c"), "plaintext in \(path)")
            }
            expectExit(try s.run(["vault", "add", "--from-ciphio", good, "--password-file", pw]), 64)
        }
    }
}
