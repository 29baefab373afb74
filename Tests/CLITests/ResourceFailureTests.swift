import Foundation
import Glibc
import Testing
import N11TestSupport

/// A tmpfs mounted for one test (CI runs as root). Where mounting is not allowed the suite
/// is skipped, and says so.
final class TinyFileSystem {
    let path: String

    init(at path: String, kilobytes: Int) throws {
        self.path = path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard Self.shell("mount -t tmpfs -o size=\(kilobytes)k,mode=0755 tmpfs '\(path)'") == 0 else {
            throw RunnerError(description: "cannot mount a tmpfs at \(path)")
        }
    }

    func remountReadOnly() -> Bool { Self.shell("mount -o remount,ro '\(path)'") == 0 }

    deinit { _ = Self.shell("umount '\(path)'") }

    static func shell(_ command: String) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", command + " 2>/dev/null"]
        guard (try? p.run()) != nil else { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }

    static let mountingWorks: Bool = {
        guard geteuid() == 0, let dir = try? makeTemporaryDirectory(prefix: "n11-mount-probe") else { return false }
        defer { rmdir(dir) }
        guard shell("mount -t tmpfs -o size=64k tmpfs '\(dir)'") == 0 else { return false }
        _ = shell("umount '\(dir)'")
        return true
    }()
}

/// Names below `dir`, hidden ones included.
func everything(under dir: String) -> [String] {
    (FileManager.default.enumerator(atPath: dir)?.allObjects as? [String] ?? []).sorted()
}

@Suite("Disk full, read-only and unwritable places",
       .enabled(if: TinyFileSystem.mountingWorks, "needs root and permission to mount a tmpfs (CI has both); skipped here"),
       .serialized)
struct ResourceFailureTests {
    /// A vault with 4 MiB of photos on the normal disk, and a portable archive of it.
    func bigVault(_ s: Sandbox) throws -> (pw: String, archive: String) {
        try s.initialize()
        var files: [String] = []
        for i in 0..<4 { files.append(try s.file("big\(i).jpg", randomBytes(1 << 20))) }
        expectExit(try s.run(["vault", "add"] + files), 0)
        let pw = try s.file("pw", Array("full disk password\n".utf8))
        let archive = s.path("a.nu11vlt")
        expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
        return (pw, archive)
    }

    @Test("disk full: create, restore, vault add, cat -o and export fail with 74 and leave nothing partial")
    func diskFull() throws {
        try withSandbox { s in
            let (pw, archive) = try bigVault(s)
            let before = s.tree(s.vault)
            let full = try TinyFileSystem(at: s.path("full"), kilobytes: 1024)

            // create: no archive and no temp file on the full disk; the vault is untouched.
            let create = try s.run(["create", "--portable", "-o", full.path + "/b.nu11vlt", "--password-file", pw] + fastKDF)
            expectExit(create, 74)
            // The system error as it is (ZipOutputFile keeps it), not libzip's generic wording.
            #expect(create.err.contains("No space left on device"), "\(create)")
            // …naming the archive asked for, not the hidden temp file.
            #expect(create.err.contains("'\(full.path)/b.nu11vlt'") && !create.err.contains(".n11tmp"), "\(create)")
            #expect(everything(under: full.path).isEmpty, "left on the full disk: \(everything(under: full.path))")
            #expect(s.tree(s.vault) == before)

            // restore into a new vault there: nothing of it remains.
            let restore = try s.run(["restore", archive, "--password-file", pw, "--vault", full.path + "/v"])
            expectExit(restore, 74)
            #expect(everything(under: full.path).isEmpty, "left on the full disk: \(everything(under: full.path))")

            // vault add into an existing vault there: it keeps exactly what it had.
            let small = try s.file("small.jpg", [1, 2, 3])
            expectExit(try s.run(["vault", "add", "--vault", full.path + "/v2", small]), 0)
            let smallVault = s.tree(full.path + "/v2")
            let add = try s.run(["vault", "add", "--vault", full.path + "/v2", s.path("big0.jpg"), s.path("big1.jpg")])
            expectExit(add, 74)
            #expect(s.tree(full.path + "/v2") == smallVault, "the vault changed")
            #expect(!everything(under: full.path + "/v2").contains { $0.contains(".n11staging-") || $0.contains(".n11tmp-") })
            // ...and it still works.
            expectExit(try s.run(["vault", "verify", "--vault", full.path + "/v2"]), 0)

            // cat -o and export: no plaintext file, whole or partial.
            let id = try #require(try s.list().items.first?["id"] as? String)
            expectExit(try s.run(["vault", "cat", id, "-o", full.path + "/out.jpg"]), 74)
            let export = try s.run(["restore", archive, "--password-file", pw, "--export", full.path + "/export"])
            expectExit(export, 74)
            #expect(export.err.contains("'\(full.path)/export/Photos/") && !export.err.contains(".n11tmp"), "\(export)")
            #expect(Set(everything(under: full.path)) == Set(everything(under: full.path).filter { $0.hasPrefix("v2") }),
                    "left on the full disk: \(everything(under: full.path))")
        }
    }

    @Test("disk full while the writer thread makes small items' files: restore into a vault, export and vault add of notes fail with 74, keep the vault as it was and leave nothing")
    func diskFullOnTheWriterThread() throws {
        try withSandbox { s in
            // 600 notes of 200 bytes: each takes a 4 KiB page of the tmpfs, so 1 MiB fills
            // after about 250 of them, well inside the writer's batches (items of at most
            // 16 KiB are written beside, not through).
            try s.initialize()
            var notes: [String] = []
            for i in 0..<600 { notes.append(try s.file(String(format: "n%03d.txt", i), Array(String(repeating: "\(i) ", count: 60).utf8.prefix(200)))) }
            expectExit(try s.run(["vault", "add", "--note"] + notes), 0)
            let pw = try s.file("pw", Array("full disk password\n".utf8))
            let archive = s.path("a.nu11vlt")
            expectExit(try s.run(["create", "--portable", "-o", archive, "--password-file", pw] + fastKDF), 0)
            let full = try TinyFileSystem(at: s.path("full"), kilobytes: 1024)
            let vault = full.path + "/v"
            expectExit(try s.run(["vault", "add", "--vault", vault, "--note", notes[0]]), 0)
            let before = s.tree(vault)
            func expectUnchanged(_ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
                // Names only in the message: the trees' bytes would bury it.
                let now = s.tree(vault)
                let unchanged = now == before
                #expect(unchanged, "\(what) changed the vault: \(Set(now.keys).symmetricDifference(before.keys).sorted()) came or went, \(now.keys.filter { before[$0] != nil && before[$0] != now[$0] }.sorted()) changed",
                        sourceLocation: sourceLocation)
                #expect(everything(under: full.path).allSatisfy { $0 == "v" || $0.hasPrefix("v/") }
                        && !everything(under: vault).contains { $0.contains(".n11staging-") || $0.contains(".n11tmp-") },
                        "\(what) left \(everything(under: full.path))", sourceLocation: sourceLocation)
            }

            let restore = try s.run(["restore", archive, "--password-file", pw, "--vault", vault])
            expectExit(restore, 74)
            #expect(restore.err.contains("No space left on device") && restore.err.contains("'\(vault)/Notes/"), "\(restore)")
            expectUnchanged("the restore")

            let export = try s.run(["restore", archive, "--password-file", pw, "--export", full.path + "/export", "--progress"])
            expectExit(export, 74)
            // Naming where the note was going, not the hidden staging directory.
            #expect(export.err.contains("No space left on device") && export.err.contains("'\(full.path)/export/Notes/")
                    && !export.err.contains(".n11tmp"), "\(export)")
            // The last progress line says how far it got (at least the 250 notes that fit),
            // not the throttled "0/600 items" of its start.
            let lastLine = export.err.split(separator: "\n").last { $0.hasPrefix("n11archive: export ") }
            let counted = lastLine.flatMap { Int($0.dropFirst("n11archive: export ".count).prefix { $0 != "/" }) }
            #expect((counted ?? 0) >= 250, "\(export)")
            expectUnchanged("the export")

            let add = try s.run(["vault", "add", "--vault", vault, "--note"] + notes)
            expectExit(add, 74)
            #expect(add.err.contains("No space left on device"), "\(add)")
            expectUnchanged("the add")
            // ...and the vault still works.
            expectExit(try s.run(["vault", "verify", "--vault", vault]), 0)
        }
    }

    @Test("vault rotate-keys where a second copy of the items does not fit: 74 naming the space, nothing changed")
    func rotationNeedsSpace() throws {
        try withSandbox { s in
            try s.initialize()
            let fs = try TinyFileSystem(at: s.path("small"), kilobytes: 24 << 10)
            let vault = ["--vault", fs.path + "/v"]
            var files: [String] = []
            for i in 0..<5 { files.append(try s.file("p\(i).jpg", randomBytes(1 << 20))) }
            expectExit(try s.run(["vault", "add"] + vault + files), 0)
            let tree = s.tree(fs.path + "/v")
            let keys = try s.run(["key", "list", "--compartment-keys"])

            let refused = try s.run(["vault", "rotate-keys"] + vault)
            expectExit(refused, 74)
            #expect(refused.err.contains("MiB free") && refused.err.contains("--compartment"), "\(refused)")
            #expect(s.tree(fs.path + "/v") == tree, "the vault changed")
            #expect(try s.run(["key", "list", "--compartment-keys"]).out == keys.out, "the key store changed")
            // A compartment with nothing in it fits.
            expectExit(try s.run(["vault", "rotate-keys", "--compartment", "fade"] + vault), 0)
            expectExit(try s.run(["vault", "verify"] + vault), 0)
        }
    }

    @Test("a vault on a read-only file system whose last writer was killed: rows committed only in the WAL are read, or the vault is refused, never read without them")
    func readOnlyWithWAL() throws {
        try withSandbox { s in
            try s.initialize()
            let fs = try TinyFileSystem(at: s.path("ro"), kilobytes: 2048)
            let vault = fs.path + "/v"
            expectExit(try s.run(["vault", "add", "--vault", vault, try s.file("p.jpg", randomBytes(1000))]), 0)
            #expect(try s.list(["--vault", vault]).items.count == 1)
            // A committed change (every row deleted) left in the WAL by a process that died
            // before checkpointing, as a killed writer leaves it.
            let script = "import sqlite3, os, sys\nc = sqlite3.connect(sys.argv[1])\nc.execute('DELETE FROM items')\nc.commit()\nos._exit(0)\n"
            #expect(TinyFileSystem.shell("python3 -c \"\(script)\" '\(vault)/Catalogue.sqlite'") == 0)
            #expect((fileSize(vault + "/Catalogue.sqlite-wal") ?? 0) > 0, "the change is in the WAL")
            // Without SQLite's -shm index (a copy that left it out) the WAL cannot be read in
            // place: refused, never read as if the change had not happened.
            let index = try readBytes(vault + "/Catalogue.sqlite-shm")
            #expect(unlink(vault + "/Catalogue.sqlite-shm") == 0)
            #expect(fs.remountReadOnly())
            let refused = try s.run(["vault", "list", "--json", "--vault", vault])
            expectExit(refused, 74)
            #expect(refused.err.contains("Catalogue.sqlite-wal") && refused.err.contains("writable place"), "\(refused)")
            // With it, SQLite reads the WAL read-only.
            #expect(TinyFileSystem.shell("mount -o remount,rw '\(fs.path)'") == 0)
            try writeBytes(index, to: vault + "/Catalogue.sqlite-shm")
            #expect(fs.remountReadOnly())
            let listed = try s.list(["--vault", vault])
            #expect(listed.items.isEmpty, "the committed deletion in the WAL was ignored: \(listed.items)")
        }
    }

    @Test("read-only file system: add, create and cat -o fail with 74 and change nothing")
    func readOnly() throws {
        try withSandbox { s in
            try s.initialize()
            let fs = try TinyFileSystem(at: s.path("ro"), kilobytes: 2048)
            let photo = try s.file("p.jpg", randomBytes(1000))
            expectExit(try s.run(["vault", "add", "--vault", fs.path + "/v", photo]), 0)
            let id = try #require(try s.list(["--vault", fs.path + "/v"]).items.first?["id"] as? String)
            let before = s.tree(fs.path)
            #expect(fs.remountReadOnly())
            let add = try s.run(["vault", "add", "--vault", fs.path + "/v", photo])
            expectExit(add, 74)
            #expect(add.err.contains("read-only"), "\(add)")
            expectExit(try s.run(["create", "--secure", "--vault", fs.path + "/v", "-o", s.path("x.nu11vlt")]), 74)
            expectExit(try s.run(["vault", "cat", id, "--vault", fs.path + "/v", "-o", fs.path + "/out"]), 74)
            let readOnlyOutput = try s.run(["create", "--secure", "-o", fs.path + "/y.nu11vlt"])
            expectExit(readOnlyOutput, 74)
            // The message names the file asked for, not the hidden temp name beside it.
            #expect(readOnlyOutput.err.contains("cannot create '\(fs.path)/y.nu11vlt'") && !readOnlyOutput.err.contains(".n11tmp"),
                    "\(readOnlyOutput)")
            #expect(s.tree(fs.path) == before)
            #expect(!exists(s.path("x.nu11vlt")))
        }
    }

    @Test("a directory without write permission: create and cat -o fail with 74 naming the place",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs setpriv to drop root"))
    func noPermission() throws {
        try withSandbox { s in
            // The tool runs as nobody; the sandbox must be reachable for it.
            chmod(s.root, 0o755)
            let home = s.path("nobody-home")
            let locked = s.path("locked")
            try FileManager.default.createDirectory(atPath: locked, withIntermediateDirectories: true)
            chmod(locked, 0o755)   // owned by root: nobody cannot write here
            let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", n11archiveBinary]
            func run(_ args: [String]) throws -> (Int32, String) {
                let p = Process()
                p.executableURL = URL(fileURLWithPath: asNobody[0])
                p.arguments = Array(asNobody.dropFirst()) + args
                p.environment = ["N11_HOME": home, "PATH": "/usr/bin:/bin"]
                let err = Pipe()
                p.standardError = err
                p.standardOutput = FileHandle.nullDevice
                try p.run()
                let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                p.waitUntilExit()
                return (p.terminationStatus, text)
            }
            try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
            chown(home, 65534, 65534)
            chmod(home, 0o700)
            let photo = try s.file("p.jpg", randomBytes(100))
            chmod(photo, 0o644)
            #expect(try run(["init"]).0 == 0)
            #expect(try run(["vault", "add", photo]).0 == 0)
            let (status, err) = try run(["create", "--secure", "-o", locked + "/x.nu11vlt"])
            #expect(status == 74, "\(err)")
            #expect(err.contains(locked), "\(err)")
            #expect(everything(under: locked).isEmpty)
        }
    }
}
