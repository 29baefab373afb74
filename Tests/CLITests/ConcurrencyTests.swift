import Foundation
import Glibc
import Testing
import N11TestSupport

/// Two processes at once on one vault or key store (DESIGN.md §4): the second waits
/// (--lock-wait) or fails naming the holder; nothing is ever corrupted or lost.
@Suite("Concurrent runs on one vault or key store")
struct ConcurrencyTests {
    /// Starts the binary without waiting for it.
    func start(_ s: Sandbox, _ args: [String], home: String? = nil) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: n11archiveBinary)
        p.arguments = args
        p.environment = ["N11_HOME": home ?? s.home, "PATH": "/usr/bin:/bin"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    @Test("four concurrent vault adds with --lock-wait all succeed, and every item is there and intact")
    func concurrentAdds() throws {
        try withSandbox { s in
            try s.initialize()
            var processes: [Process] = []
            for batch in 0..<4 {
                let files = try (0..<5).map { try s.file("b\(batch)-\($0).jpg", randomBytes(200_000)) }
                processes.append(try start(s, ["vault", "add", "--lock-wait", "60"] + files))
            }
            for p in processes { p.waitUntilExit() }
            #expect(processes.allSatisfy { $0.terminationStatus == 0 }, "\(processes.map(\.terminationStatus))")
            #expect(try s.list().items.count == 20)
            expectExit(try s.run(["vault", "verify"]), 0)
        }
    }

    @Test("two secure creates at once (two vaults, one key store) keep both archive keys")
    func concurrentSecureCreates() throws {
        try withSandbox { s in
            try s.initialize()
            for vault in ["v1", "v2"] {
                expectExit(try s.run(["vault", "add", "--vault", s.path(vault), try s.file("\(vault).jpg", randomBytes(300_000))]), 0)
            }
            for round in 0..<3 {
                let a = try start(s, ["create", "--secure", "--vault", s.path("v1"), "-o", s.path("a\(round).nu11vlt")])
                let b = try start(s, ["create", "--secure", "--vault", s.path("v2"), "-o", s.path("b\(round).nu11vlt")])
                a.waitUntilExit()
                b.waitUntilExit()
                #expect(a.terminationStatus == 0 && b.terminationStatus == 0)
            }
            // Every archive's key survived the other process's write of the key store.
            for name in (0..<3).flatMap({ ["a\($0)", "b\($0)"] }) {
                let vault = name.hasPrefix("a") ? "v1" : "v2"
                expectExit(try s.run(["restore", s.path("\(name).nu11vlt"), "--vault", s.path("r-\(name)")]), 0)
                _ = vault
            }
        }
    }

    @Test("a held vault lock: create and restore fail with 75 naming the holder; with --lock-wait they wait")
    func heldLock() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let archive = s.path("s.nu11vlt")
            expectExit(try s.run(["create", "--secure", "-o", archive]), 0)
            let lockPath = s.vault + "/.lock"
            let fd = open(lockPath, O_RDWR)
            #expect(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
            _ = ftruncate(fd, 0)
            _ = "424242\n".withCString { write(fd, $0, 7) }
            let create = try s.run(["create", "--secure", "-o", s.path("t.nu11vlt")])
            expectExit(create, 75)
            #expect(create.err.contains("424242"), "\(create)")
            expectExit(try s.run(["restore", archive]), 75)
            // Released after half a second: a waiting run goes ahead.
            let waiter = try start(s, ["create", "--secure", "-o", s.path("w.nu11vlt"), "--lock-wait", "30"])
            usleep(500_000)
            #expect(waiter.isRunning, "it should be waiting for the lock")
            flock(fd, LOCK_UN)
            close(fd)
            waiter.waitUntilExit()
            #expect(waiter.terminationStatus == 0)
            expectExit(try s.run(["verify", s.path("w.nu11vlt")]), 0)
        }
    }

    @Test("the running tool is not dumpable: its /proc entries belong to root even when it runs as nobody",
          .enabled(if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
                   "needs root and setpriv to run the tool as another user"))
    func notDumpable() throws {
        try withSandbox { s in
            chmod(s.root, 0o755)
            let home = s.path("nobody-home")
            try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
            chown(home, 65534, 65534)
            chmod(home, 0o700)
            let pin = try s.file("pin", Array("24681357\n".utf8))
            chmod(pin, 0o644)
            func asNobody(_ args: [String], stdin: Any? = nil) throws -> Process {
                let p = Process()
                p.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
                p.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "--", n11archiveBinary] + args
                p.environment = ["N11_HOME": home, "PATH": "/usr/bin:/bin"]
                p.standardOutput = FileHandle.nullDevice
                p.standardError = FileHandle.nullDevice
                if let stdin { p.standardInput = stdin }
                try p.run()
                return p
            }
            let setup = try asNobody(["init", "--pin", "--pin-file", pin])
            setup.waitUntilExit()
            #expect(setup.terminationStatus == 0)
            // Blocked reading the PIN from a pipe we hold: look at its /proc entry meanwhile.
            let input = Pipe()
            let waiting = try asNobody(["vault", "list", "--pin-fd", "0"], stdin: input)
            var owner: uid_t = 65534
            for _ in 0..<200 {
                var st = stat()
                if stat("/proc/\(waiting.processIdentifier)/status", &st) == 0 {
                    // setpriv execs the tool in the same process; wait until it has started.
                    let comm = (try? String(contentsOfFile: "/proc/\(waiting.processIdentifier)/comm", encoding: .utf8)) ?? ""
                    if comm.hasPrefix("n11archive") { owner = st.st_uid; if owner == 0 { break } }
                }
                usleep(10_000)
            }
            try input.fileHandleForWriting.write(contentsOf: Data("24681357\n".utf8))
            try input.fileHandleForWriting.close()
            waiting.waitUntilExit()
            #expect(owner == 0, "a dumpable process's /proc entries belong to its user (65534)")
            #expect(waiting.terminationStatus == 0)
        }
    }
}

/// A failed restore onto a new machine takes back the key store it made; nobody may have
/// started using those keys meanwhile.
@Suite("A restore's new key store is the restore's until it ends")
struct RestoreKeyStoreHoldTests {
    @Test("while a restore that made a key store runs, no other command uses it; its failure leaves nothing")
    func newKeyStoreHeldUntilTheRestoreEnds() throws {
        try withSandbox { s in
            try s.initialize()
            // A large item, damaged at its end: the restore fails well after making the key store.
            expectExit(try s.run(["vault", "add", try s.file("big.bin", randomBytes(24 << 20))]), 0)
            let pw = try s.passwordFile()
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            let damaged = try s.damagedCopy(of: archive)

            let fresh = s.path("fresh")
            func start(_ args: [String]) throws -> Process { try ConcurrencyTests().start(s, args, home: fresh) }
            let restore = try start(["restore", damaged, "--password-file", pw])
            // Stop the restore as soon as its key store exists.
            let deadline = Date().addingTimeInterval(30)
            while !exists(fresh + "/keystore.n11keys") && restore.isRunning && Date() < deadline { usleep(500) }
            kill(restore.processIdentifier, SIGSTOP)
            try #require(exists(fresh + "/keystore.n11keys"), "the restore ended before it made its key store")
            // Meanwhile another command wants to keep a note in another vault with those keys.
            let other = s.path("other-vault")
            let add = try start(["vault", "add", "--vault", other, try s.file("note.txt", Array("mine".utf8))])
            usleep(1_000_000)
            kill(restore.processIdentifier, SIGCONT)
            restore.waitUntilExit()
            add.waitUntilExit()
            #expect(restore.terminationStatus == 65)
            // The add either waited and then found no key store, or was told the store was busy:
            // never did it keep an item under keys that the failed restore then removed.
            #expect([75, 78].contains(add.terminationStatus), "vault add exited \(add.terminationStatus)")
            #expect(!exists(fresh), "left: \(listing(of: fresh))")
            #expect(!exists(other), "left: \(listing(of: other))")
        }
    }
}
