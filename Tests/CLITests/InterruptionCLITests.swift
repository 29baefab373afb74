import Foundation
import Glibc
import Testing
import N11TestSupport

// Ctrl-C (SIGINT) and SIGTERM in the middle of create, restore and export: the process ends
// by that signal, and nothing it made is left: no hidden temp archive, no staging, and on a
// fresh home no key store or vault.

/// Starts n11archive, waits until `ready()` says it is mid-work (or it exits), sends
/// `signal`, and returns how it ended: the exit code, or 128 + the signal that ended it.
func interrupt(_ arguments: [String], home: String, environment extra: [String: String] = [:], signal: Int32,
               standardError: String? = nil, when ready: () -> Bool) throws -> (status: Int32, sawWork: Bool) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: n11archiveBinary)
    process.arguments = arguments
    var environment = ProcessInfo.processInfo.environment.merging(extra) { $1 }
    environment["N11_HOME"] = home
    environment["N11_PIN_FILE"] = nil
    process.environment = environment
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice
    if let standardError {
        if !FileManager.default.fileExists(atPath: standardError) { _ = FileManager.default.createFile(atPath: standardError, contents: nil) }
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: standardError))
    } else {
        process.standardError = FileHandle.nullDevice
    }
    try process.run()
    var sawWork = false
    let deadline = Date().addingTimeInterval(60)
    while process.isRunning && Date() < deadline {
        if ready() { sawWork = true; break }
        usleep(2_000)
    }
    kill(process.processIdentifier, signal)
    process.waitUntilExit()
    let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    return (status, sawWork)
}

private func hidden(in directory: String) -> [String] {
    listing(of: directory).filter { $0.hasPrefix(".n11tmp-") || $0.hasPrefix(".n11staging-") }
}

@Suite("n11archive CLI: Ctrl-C and SIGTERM clean up")
struct InterruptionCLITests {
    /// A vault with one large photo and its portable archive.
    private func prepare(_ s: Sandbox) throws -> (archive: String, password: String) {
        try s.initialize()
        let big = s.path("big.jpg")
        let fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var block = randomBytes(1 << 20)
        for _ in 0..<192 { block[0] &+= 1; _ = write(fd, block, block.count) }
        close(fd)
        expectExit(try s.run(["vault", "add", big]), 0)
        unlink(big)
        let password = try s.passwordFile()
        let archive = s.path("big.nu11vlt")
        expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", password] + fastKDF), 0)
        return (archive, password)
    }

    @Test("SIGINT during create leaves no hidden temp archive and no output", arguments: [SIGINT, SIGTERM])
    func create(signal: Int32) throws {
        try withSandbox { s in
            _ = try prepare(s)
            let out = s.path("out")
            mkdir(out, 0o700)
            let errors = s.path("stderr")
            let (status, sawWork) = try interrupt(["create", "--portable", "-o", out + "/new.nu11vlt", "--password-file", s.path("password")] + fastKDF,
                                                  home: s.home, signal: signal, standardError: errors) { !hidden(in: out).isEmpty }
            #expect(sawWork, "the temp archive never appeared")
            #expect(status == 128 + signal, "exit \(status)")
            #expect(listing(of: out).isEmpty, "\(listing(of: out))")
            // A person is told why it stopped, not left with exit 130 alone.
            let said = String(decoding: try readBytes(errors), as: UTF8.self)
            #expect(said.contains("warning: interrupted by \(signal == SIGINT ? "Ctrl-C (SIGINT)" : "SIGTERM"); took back what this run had made"),
                    "\(said)")
        }
    }

    @Test("with standard error unwritable (a closed terminal, /dev/full), SIGTERM still takes back what the run made")
    func unwritableStandardError() throws {
        try withSandbox { s in
            _ = try prepare(s)
            let out = s.path("out")
            mkdir(out, 0o700)
            let (status, sawWork) = try interrupt(["create", "--portable", "-o", out + "/new.nu11vlt", "--password-file", s.path("password")] + fastKDF,
                                                  home: s.home, signal: SIGTERM, standardError: "/dev/full") { !hidden(in: out).isEmpty }
            #expect(sawWork, "the temp archive never appeared")
            #expect(status == 128 + SIGTERM, "exit \(status): not ended by the signal (a trap writing the message?)")
            #expect(listing(of: out).isEmpty, "\(listing(of: out))")
        }
    }

    @Test("SIGTERM during a restore onto a fresh home leaves no key store, vault or staging")
    func restoreFreshHome() throws {
        try withSandbox { s in
            let (archive, password) = try prepare(s)
            let home2 = s.path("home2")
            let (status, sawWork) = try interrupt(["restore", archive, "--password-file", password], home: home2, signal: SIGTERM) {
                !hidden(in: home2 + "/vault").isEmpty
            }
            #expect(sawWork, "the staging never appeared")
            #expect(status == 128 + SIGTERM, "exit \(status)")
            #expect(!exists(home2 + "/keystore.n11keys"), "the key store this run made is still there")
            #expect(!exists(home2 + "/vault"), "\(listing(of: home2 + "/vault"))")
        }
    }

    @Test("Ctrl-C after a restore committed: it finishes and exits 0, saying so; a second Ctrl-C ends it (130), saying the restore stays",
          arguments: [1, 2])
    func afterCommit(signals: Int) throws {
        try withSandbox { s in
            let (archive, password, items) = try s.archiveOfPhotos(3)
            let home2 = s.path("home2")
            // Standard output is a pipe filled beforehand, so the report's write blocks: the
            // run is held right after its commit point, where the signals then arrive.
            var ends: [Int32] = [0, 0]
            #expect(pipe(&ends) == 0)
            // Close-on-exec: a child another test starts later must not hold the write end.
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            defer { close(ends[0]) }
            let flags = fcntl(ends[1], F_GETFL)
            _ = fcntl(ends[1], F_SETFL, flags | O_NONBLOCK)
            let filler = [UInt8](repeating: 0x2E, count: 4096)
            while write(ends[1], filler, filler.count) > 0 {}
            _ = fcntl(ends[1], F_SETFL, flags)
            let errors = s.path("stderr")
            _ = FileManager.default.createFile(atPath: errors, contents: nil)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: n11archiveBinary)
            process.arguments = ["restore", archive, "--password-file", password]
            process.environment = ProcessInfo.processInfo.environment.merging(["N11_HOME": home2]) { $1 }
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle(fileDescriptor: ends[1], closeOnDealloc: false)
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
            try process.run()
            close(ends[1])
            // Committed: every item is in place and the staging directory is gone.
            let deadline = Date().addingTimeInterval(60)
            func committed() -> Bool {
                items.allSatisfy { exists(home2 + "/vault/Photos/\($0.id).n11") } && hidden(in: home2 + "/vault").isEmpty
            }
            while !committed() && process.isRunning && Date() < deadline { usleep(5_000) }
            #expect(committed(), "the restore never committed")
            usleep(300_000)
            kill(process.processIdentifier, SIGINT)
            usleep(500_000)
            #expect(process.isRunning, "the first Ctrl-C after the commit ended the run")
            if signals == 2 {
                kill(process.processIdentifier, SIGINT)
                usleep(500_000)
            }
            var sink = [UInt8](repeating: 0, count: 65536)
            while read(ends[0], &sink, sink.count) > 0 {}
            process.waitUntilExit()
            let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
            let said = String(decoding: try readBytes(errors), as: UTF8.self)
            #expect(said.contains("came after the restore was committed: finishing"), "\(said)")
            if signals == 1 {
                #expect(status == 0, "exit \(status): \(said)")
            } else {
                #expect(status == 128 + SIGINT, "exit \(status)")
                #expect(said.contains("after the restore was committed: it is complete and stays"), "\(said)")
                #expect(!said.contains("took back"), "\(said)")
            }
            for item in items {
                #expect(try s.run(["vault", "cat", item.id], environment: ["N11_HOME": home2]).stdout == item.bytes, "\(item.name)")
            }
        }
    }

    @Test("SIGINT while a writer thread makes notes' files (a restore into a vault, a vault add, an export): none stays, the vault is as it was",
          arguments: ["restore", "add", "export"])
    func notesMadeBeside(command: String) throws {
        try withSandbox { s in
            try s.initialize()
            let notes = s.path("notes")
            try FileManager.default.createDirectory(atPath: notes, withIntermediateDirectories: false)
            var list = ""
            for n in 0..<4000 {
                let path = "\(notes)/note\(n).txt"
                try Data("note \(n): \(String(repeating: "word ", count: n % 40))".utf8).write(to: URL(fileURLWithPath: path))
                list += path + "\n"
            }
            try Data(list.utf8).write(to: URL(fileURLWithPath: s.path("notes.list")))
            // The vault interrupted: one note already in it.
            let home2 = s.path("home2")
            expectExit(try s.run(["init"], environment: ["N11_HOME": home2]), 0)
            expectExit(try s.run(["vault", "add", "--note", "\(notes)/note7.txt"], environment: ["N11_HOME": home2]), 0)
            let folder = home2 + "/vault/Notes"
            let before = listing(of: folder)
            let arguments: [String]
            let exported = s.path("exported")
            if command == "add" {
                arguments = ["vault", "add", "--note", "--files-from", s.path("notes.list")]
            } else {
                expectExit(try s.run(["vault", "add", "--note", "--files-from", s.path("notes.list")]), 0)
                let password = try s.passwordFile()
                let archive = s.path("notes.nu11vlt")
                expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", password] + fastKDF), 0)
                arguments = ["restore", archive, "--password-file", password] + (command == "export" ? ["--export", exported] : [])
            }
            // The export's files are made in its staging directory.
            let watched = { () -> Int in
                guard command == "export" else { return listing(of: folder).count - before.count }
                return hidden(in: exported).map { listing(of: "\(exported)/\($0)/Notes").count }.max() ?? 0
            }
            // Signalled once the writer thread has made some of the files.
            let (status, sawWork) = try interrupt(arguments, home: command == "export" ? s.home : home2, signal: SIGINT) { watched() > 100 }
            #expect(sawWork, "no file was made before it ended")
            #expect(status == 128 + SIGINT, "exit \(status)")
            #expect(!exists(exported), "\(listing(of: exported))")
            let after = listing(of: folder), unchanged = after == before
            #expect(unchanged, "Notes/ holds \(after.count) files, \(before.count) before")
            #expect(hidden(in: home2 + "/vault").isEmpty)
            let listed = try s.run(["vault", "list", "--json"], environment: ["N11_HOME": home2])
            let items = try #require((try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [String: Any])?["items"] as? [[String: Any]])
            #expect(items.map { $0["name"] as? String } == ["note7.txt"], "the vault no longer holds just its one note")
            expectExit(try s.run(["vault", "verify"], environment: ["N11_HOME": home2]), 0)
        }
    }

    @Test("SIGINT during an export leaves no staged plaintext and no directory it made")
    func export() throws {
        try withSandbox { s in
            let (archive, password) = try prepare(s)
            let dir = s.path("exported")
            let (status, sawWork) = try interrupt(["restore", archive, "--export", dir, "--password-file", password], home: s.home, signal: SIGINT) {
                !hidden(in: dir).isEmpty
            }
            #expect(sawWork)
            #expect(status == 128 + SIGINT, "exit \(status)")
            #expect(!exists(dir), "\(listing(of: dir))")
        }
    }
}
