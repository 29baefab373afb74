import Foundation
import Glibc
import Testing
import N11System
import N11TestSupport

// Archives on rclone remotes, against real servers started here on 127.0.0.1 only:
// `rclone serve webdav`, `rclone serve sftp`, and OpenSSH's sshd with rclone's sftp backend.

let rcloneAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/rclone")
let sshdAvailable = FileManager.default.isExecutableFile(atPath: "/usr/sbin/sshd")
    && FileManager.default.isExecutableFile(atPath: "/usr/bin/ssh-keygen")

/// A free TCP port on 127.0.0.1 (bound and released: a small race the tests accept).
func freeLoopbackPort() -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return UInt16(bigEndian: address.sin_port)
}

/// Whether something accepts connections on 127.0.0.1:`port`.
func accepts(_ port: UInt16) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = port.bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } } == 0
}

/// A server process of the test, on 127.0.0.1, stopped when it goes away.
final class LoopbackServer: @unchecked Sendable {
    private(set) var port: UInt16
    private var process: ChildProcess?
    private let arguments: (UInt16) -> [String]

    init(_ arguments: @escaping (UInt16) -> [String]) throws {
        self.arguments = arguments
        port = freeLoopbackPort()
        try start()
    }

    func start() throws {
        process = try ChildProcess.start(arguments(port))
        for _ in 0..<100 where !accepts(port) { usleep(50_000) }
        guard accepts(port) else { throw RunnerError(description: "\(arguments(port)) did not start listening") }
    }

    /// Starts it again after `kill`, on a new port: the old one, free meanwhile, may have gone
    /// to another test's server (a CI run met an sftp server's banner where its WebDAV server
    /// had been, and `accepts` could not tell).
    func restart() throws {
        port = freeLoopbackPort()
        try start()
    }

    /// Kills it at once (SIGKILL), as a crash or a dropped link would.
    func kill() {
        process?.terminate()
        process = nil
    }

    deinit { kill() }
}

/// The sandbox's rclone configuration, with a `dav` and an `sf` remote on loopback servers
/// serving `data/` under the sandbox.
final class RemoteWorld: @unchecked Sendable {
    let s: Sandbox
    let data: String
    let webdav: LoopbackServer
    let sftp: LoopbackServer
    let config: String

    init(_ s: Sandbox) throws {
        self.s = s
        data = s.path("remote-data")
        try FileManager.default.createDirectory(atPath: data + "/backups", withIntermediateDirectories: true)
        let data = self.data
        // No directory cache: the tests change the served directory behind the server's back.
        webdav = try LoopbackServer { ["rclone", "serve", "webdav", data, "--addr", "127.0.0.1:\($0)", "--dir-cache-time", "0s"] }
        sftp = try LoopbackServer { ["rclone", "serve", "sftp", data, "--addr", "127.0.0.1:\($0)", "--user", "u", "--pass", "test-only",
                                     "--dir-cache-time", "0s"] }
        obscured = String(decoding: try ChildProcess.run(["rclone", "obscure", "test-only"]).1, as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        config = s.path("rclone.conf")
        try writeConfig()
    }

    private let obscured: String

    /// The configuration naming the servers' current ports.
    private func writeConfig() throws {
        try writeBytes(Array("""
            [dav]
            type = webdav
            url = http://127.0.0.1:\(webdav.port)/
            vendor = other

            [sf]
            type = sftp
            host = 127.0.0.1
            port = \(sftp.port)
            user = u
            pass = \(obscured)

            """.utf8), to: config)
        chmod(config, 0o600)
    }

    /// The WebDAV server back after `webdav.kill()`, on a new port the configuration names.
    func restartWebDAV() throws {
        try webdav.restart()
        try writeConfig()
    }

    var environment: [String: String] { ["RCLONE_CONFIG": config] }

    func run(_ arguments: [String], home: String? = nil) throws -> RunResult {
        var env = environment
        if let home { env["N11_HOME"] = s.path(home) }
        return try s.run(arguments, environment: env)
    }

    /// What the server holds in `backups/`, without lock objects.
    var stored: [String] { listing(of: data + "/backups").filter { !$0.hasPrefix(".n11archive.lock") } }
}

@Suite("n11archive CLI: archives on rclone remotes (loopback servers)", .serialized,
       .enabled(if: rcloneAvailable, "rclone is not installed (Scripts/setup installs it)"))
struct RemoteCLITests {
    @Test("webdav and sftp: create --output-dir REMOTE:DIR, archives, verify, list, restore, export — byte for byte; nothing partial is left")
    func roundTrips() throws {
        try withSandbox { s in
            let originals = try s.fillVault()
            let pw = try s.passwordFile()
            let world = try RemoteWorld(s)
            for remote in ["dav", "sf"] {
                let created = try world.run(["create", "--portable", "--output-dir", "\(remote):backups", "--password-file", pw, "--json"] + fastKDF)
                expectExit(created, 0)
                let document = try jsonDocument(created)
                let archive = try #require(document["archive"] as? String)
                #expect(archive.hasPrefix("\(remote):backups/n11archive-"))
                let upload = try #require(document["upload"] as? [String: Any])
                #expect(upload["remote"] as? String == archive && upload["bytes"] as? Int == document["archiveBytes"] as? Int)
                // WebDAV keeps no hash: the upload was read back. rclone's sftp server answers
                // sha1sum itself, so there the remote's SHA-1 checked it.
                #expect(upload["checkedBy"] as? String == (remote == "dav" ? "read-back" : "sha1"), "\(upload)")
                // rclone's sftp backend takes a stream (PutStream): the upload followed the
                // archive as it was written, and its SHA-1 was taken on the way. rclone's
                // webdav backend does not: the spooled archive was uploaded once complete.
                #expect(upload["streamed"] as? Bool == (remote == "sf"), "\(upload)")
                #expect(created.err.contains(remote == "sf" ? "(it began with the archive)" : "uploading "), "\(created.err)")
                let name = String(archive.split(separator: "/").last!)
                #expect(world.stored.contains(name), "\(world.stored)")
                #expect(world.stored.allSatisfy { !$0.hasPrefix(".n11tmp") }, "temp objects left: \(world.stored)")
                #expect(listing(of: s.home + "/spool").isEmpty, "the spooled copy is removed after the upload")

                let listedArchives = try world.run(["archives", "\(remote):backups", "--json"])
                expectExit(listedArchives, 0)
                let entries = try #require(try jsonDocument(listedArchives)["archives"] as? [[String: Any]])
                #expect(entries.contains { $0["archive"] as? String == archive && $0["mode"] as? String == "portable" })

                let verified = try world.run(["verify", archive, "--password-file", pw])
                expectExit(verified, 0)
                #expect(verified.err.contains("read as it arrives"), "\(verified.err)")
                expectExit(try world.run(["verify", "--as-written", archive]), 0)
                let export = s.path("export-\(remote)")
                expectExit(try world.run(["restore", archive, "--password-file", pw, "--export", export], home: "other-\(remote)"), 0)
                for (file, bytes) in originals {
                    let folder = file.hasSuffix(".txt") ? "Notes" : "Photos"
                    #expect(try readBytes("\(export)/\(folder)/\(file)") == bytes, "\(remote): \(file)")
                }
                let restored = try world.run(["restore", archive, "--password-file", pw], home: "new-\(remote)")
                expectExit(restored, 0)
                #expect(restored.err.contains("read as it arrives"), "\(restored.err)")
                #expect(listing(of: s.path("new-\(remote)/spool")).isEmpty, "the fetched copy is removed")
            }
        }
    }

    @Test("no secret reaches rclone: its command lines and environment never hold the password")
    func noSecretToRclone() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let secret = "a password that must never leave 1234"
            let pw = try s.passwordFile(secret + "\n")
            let world = try RemoteWorld(s)
            // A wrapper that records what each rclone call is given, then runs rclone.
            let log = s.path("rclone-calls.log")
            let wrapper = try s.file("rclone-wrapper", Array("#!/bin/sh\n{ printf '%s\\n' \"$*\"; env; } >> '\(log)'\nexec rclone \"$@\"\n".utf8))
            chmod(wrapper, 0o755)
            var environment = world.environment
            environment["N11_RCLONE"] = wrapper
            let created = try s.run(["create", "--portable", "--output-dir", "dav:backups", "--password-file", pw, "--json"] + fastKDF,
                                    environment: environment)
            expectExit(created, 0)
            let archive = try #require(try jsonDocument(created)["archive"] as? String)
            expectExit(try s.run(["verify", archive, "--password-file", pw], environment: environment), 0)
            let calls = String(decoding: try readBytes(log), as: UTF8.self)
            #expect(calls.contains("copyto"), "the wrapper was used")
            #expect(!calls.contains(secret))
        }
    }

    @Test("a failed upload with --progress: the line drawn again is the upload's, where it stopped, not the finished create's")
    func failedUploadProgress() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let world = try RemoteWorld(s)
            // An rclone whose uploads of the archive fail (the lock's go through).
            let wrapper = try s.file("rclone-failing-upload", Array("""
                #!/bin/sh
                case " $* " in *" copyto "*n11archive-2*|*" rcat "*n11archive-2*) cat > /dev/null; echo 'upload refused' >&2; exit 1;; esac
                exec rclone "$@"

                """.utf8))
            chmod(wrapper, 0o755)
            var environment = world.environment
            environment["N11_RCLONE"] = wrapper
            let created = try s.run(["create", "--portable", "--output-dir", "dav:backups", "--password-file", pw, "--progress"] + fastKDF,
                                    environment: environment)
            #expect(created.status != 0, "\(created)")
            let progress = created.err.split(separator: "\n").filter { $0.hasPrefix("n11archive: create ") || $0.hasPrefix("n11archive: upload ") }
            #expect(progress.contains { $0.hasPrefix("n11archive: create ") }, "\(created)")
            #expect(progress.last?.hasPrefix("n11archive: upload ") == true, "\(created)")
            #expect(world.stored.isEmpty, "\(world.stored)")
        }
    }

    @Test("mistakes and outages: rclone missing, no such remote, no such directory or file, a stopped server: clear codes, nothing left")
    func failures() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let world = try RemoteWorld(s)
            let vaultBefore = s.tree(s.vault)
            let noRclone = try s.run(["create", "--portable", "--output-dir", "dav:backups", "--password-file", pw] + fastKDF,
                                     environment: world.environment.merging(["N11_RCLONE": "/nonexistent/rclone"]) { $1 })
            expectExit(noRclone, 78)
            #expect(noRclone.err.contains("rclone is not installed"), "\(noRclone)")
            let unknown = try world.run(["create", "--portable", "--output-dir", "nosuch:backups", "--password-file", pw] + fastKDF)
            expectExit(unknown, 78)
            #expect(unknown.err.contains("no remote named 'nosuch'"), "\(unknown)")
            let noDir = try world.run(["create", "--portable", "--output-dir", "dav:missing", "--password-file", pw] + fastKDF)
            expectExit(noDir, 66)
            expectExit(try world.run(["verify", "dav:backups/n11archive-20260101T000000Z.nu11vlt", "--password-file", pw]), 66)
            world.webdav.kill()
            let down = try world.run(["create", "--portable", "--output-dir", "dav:backups", "--password-file", pw] + fastKDF)
            expectExit(down, 74)
            #expect(down.err.contains("cannot reach"), "\(down)")
            #expect(world.stored.isEmpty, "\(world.stored)")
            #expect(s.tree(s.vault) == vaultBefore)
            #expect(listing(of: s.home + "/spool").isEmpty)
        }
    }

    @Test("the server dies during an upload, then during a download: no archive under a final name, the vault unchanged, the next prune removes the temp object")
    func killedServer() throws {
        try withSandbox { s in
            try s.initialize()
            // Large enough that the upload and the download take a while.
            let block = randomBytes(1 << 20)
            var content: [UInt8] = []
            content.reserveCapacity(48 << 20)
            for _ in 0..<48 { content.append(contentsOf: block) }
            let big = try s.file("big.jpg", content)
            expectExit(try s.run(["vault", "add", big]), 0)
            unlink(big)
            let pw = try s.passwordFile()
            let world = try RemoteWorld(s)
            let vaultBefore = s.tree(s.vault)
            // Kill the server once the temp object appears on it.
            let killer = Thread {
                for _ in 0..<600 {
                    if listing(of: world.data + "/backups").contains(where: { $0.hasPrefix(".n11tmp-") }) { break }
                    usleep(10_000)
                }
                usleep(100_000)
                world.webdav.kill()
            }
            killer.start()
            let upload = try world.run(["create", "--portable", "--output-dir", "dav:backups", "--password-file", pw] + fastKDF)
            #expect(upload.status == 74, "\(upload)")
            #expect(!world.stored.contains { $0.hasPrefix("n11archive-") }, "a final name appeared: \(world.stored)")
            #expect(s.tree(s.vault) == vaultBefore)
            #expect(listing(of: s.home + "/spool").isEmpty)

            // Back up: the next prune sweeps the temp object away; a new create goes through.
            try world.restartWebDAV()
            let made = try world.run(["create", "--portable", "--output-dir", "dav:backups", "--password-file", pw, "--json"] + fastKDF)
            expectExit(made, 0)
            let archive = try #require(try jsonDocument(made)["archive"] as? String)
            expectExit(try world.run(["prune", "dav:backups", "--keep-last", "1", "--password-file", pw]), 0)
            #expect(world.stored.allSatisfy { !$0.hasPrefix(".n11tmp-") }, "\(world.stored)")

            // A download cut off: the restore fails and leaves the destination as it was.
            let killer2 = Thread {
                for _ in 0..<600 {
                    if let spool = try? FileManager.default.contentsOfDirectory(atPath: s.path("fresh/spool")),
                       spool.contains(where: { (fileSize(s.path("fresh/spool/" + $0)) ?? 0) > 1 << 20 }) { break }
                    usleep(10_000)
                }
                world.webdav.kill()
            }
            killer2.start()
            let download = try world.run(["restore", archive, "--password-file", pw], home: "fresh")
            #expect(download.status == 74, "\(download)")
            #expect(!FileManager.default.fileExists(atPath: s.path("fresh/keystore.n11keys")), "a failed restore leaves no key store")
            #expect(listing(of: s.path("fresh/spool")).isEmpty, "no partial download is left")

            // Back up: the same archive restores as it downloads (its end fetched beside the
            // rest), byte for byte. (The killer first ends its `kill`, which would otherwise
            // take the restarted server down with the old one.)
            while !killer2.isFinished { usleep(10_000) }
            try world.restartWebDAV()
            let export = s.path("fresh-export")
            let again = try world.run(["restore", archive, "--password-file", pw, "--export", export], home: "fresh")
            expectExit(again, 0)
            #expect(again.err.contains("read as it arrives"), "\(again.err)")
            #expect(try readBytes(export + "/Photos/big.jpg") == content)
            #expect(listing(of: s.path("fresh/spool")).isEmpty)
        }
    }

    @Test("a write-only machine prunes its recipient archives on a remote by its records, and refuses when the newest changed there")
    func pruneWriteOnlyRemote() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let world = try RemoteWorld(s)
            expectExit(try world.run(["init"], home: "offline"), 0)
            expectExit(try world.run(["key", "generate"], home: "offline"), 0)
            let pub = try s.file("backup.pub", Array(try world.run(["key", "export-public"], home: "offline").stdout))
            var made: [String] = []
            for _ in 0..<3 {
                let run = try world.run(["create", "--portable", "--recipient", pub, "--output-dir", "dav:backups", "--json"])
                expectExit(run, 0)
                made.append(try #require(try jsonDocument(run)["archive"] as? String))
            }
            // Bit rot on the server in the newest: nothing is deleted.
            let newest = world.data + "/backups/" + made[2].split(separator: "/").last!
            let original = try readBytes(newest)
            var changed = original
            changed[changed.count / 2] ^= 0x01
            try writeBytes(changed, to: newest)
            let refused = try world.run(["prune", "dav:backups", "--keep-last", "1"])
            expectExit(refused, 65)
            #expect(refused.err.contains("nothing was deleted"), "\(refused)")
            #expect(world.stored.filter { $0.hasPrefix("n11archive-") }.count == 3)
            try writeBytes(original, to: newest)
            // Ctrl-C during the deletions (sent by an rclone that then refuses the second
            // deletion): what was deleted before it is said on stdout, as it happened.
            let counter = s.path("deletions")
            let wrapper = try s.file("rclone-interrupting-delete", Array("""
                #!/bin/sh
                case " $* " in *" deletefile "*)
                    echo x >> '\(counter)'
                    if [ "$(wc -l < '\(counter)')" -ge 2 ]; then kill -INT $PPID; sleep 2; exit 1; fi;;
                esac
                exec rclone "$@"

                """.utf8))
            chmod(wrapper, 0o755)
            let interrupted = try s.run(["prune", "dav:backups", "--keep-last", "1"],
                                        environment: world.environment.merging(["N11_RCLONE": wrapper]) { $1 })
            expectExit(interrupted, 130)
            let left = world.stored.filter { $0.hasPrefix("n11archive-") }
            let gone = made.map { String($0.split(separator: "/").last!) }.filter { !left.contains($0) }
            #expect(gone.count == 1 && interrupted.out == "deleted \(gone[0])\n", "\(interrupted)")
            let pruned = try world.run(["prune", "dav:backups", "--keep-last", "1"])
            expectExit(pruned, 0)
            #expect(pruned.out.contains("deleted ") && pruned.out.contains("keep "), "\(pruned)")
            #expect(world.stored.filter { $0.hasPrefix("n11archive-") } == [String(made[2].split(separator: "/").last!)])
            expectExit(try world.run(["verify", made[2]], home: "offline"), 0)
        }
    }

    @Test("credentials the server refuses are 77; another machine's live lock object makes prune wait, then 75; a dead one of this host is ignored")
    func credentialsAndLocks() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let world = try RemoteWorld(s)
            // A WebDAV server that wants a user and password, and a configuration with the wrong one.
            let guarded = try LoopbackServer { ["rclone", "serve", "webdav", world.data, "--addr", "127.0.0.1:\($0)",
                                                "--user", "u", "--pass", "right-one"] }
            let wrong = String(decoding: try ChildProcess.run(["rclone", "obscure", "wrong-one"]).1, as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let config = s.path("rclone-auth.conf")
            try writeBytes(Array("[auth]\ntype = webdav\nurl = http://127.0.0.1:\(guarded.port)/\nvendor = other\nuser = u\npass = \(wrong)\n".utf8),
                           to: config)
            let refused = try s.run(["create", "--portable", "--output-dir", "auth:backups", "--password-file", pw] + fastKDF,
                                    environment: ["RCLONE_CONFIG": config])
            expectExit(refused, 77)
            #expect(refused.err.contains("refused rclone's credentials"), "\(refused)")

            // A lock object of another machine, fresh: prune waits --lock-wait, then gives up.
            expectExit(try world.run(["create", "--portable", "--output-dir", "dav:backups", "--password-file", pw] + fastKDF), 0)
            let foreignLock = world.data + "/backups/.n11archive.lock.shared.other-host.4242.abcdef"
            try writeBytes(Array("other-host pid 4242 shared\n".utf8), to: foreignLock)
            let started = Date()
            let busy = try world.run(["prune", "dav:backups", "--keep-last", "1", "--password-file", pw, "--lock-wait", "2"])
            expectExit(busy, 75)
            #expect(Date().timeIntervalSince(started) >= 2, "prune should have waited")
            #expect(busy.err.contains("lock object"), "\(busy)")
            // The same object named for this host and a process that is gone: stale, removed.
            unlink(foreignLock)
            let hostTag = String(ProcessInfo.processInfo.hostName.map { $0.isLetter || $0.isNumber ? $0 : "-" }.prefix(40))
            let deadLock = world.data + "/backups/.n11archive.lock.exclusive.\(hostTag).999999.abcdef"
            try writeBytes(Array("dead\n".utf8), to: deadLock)
            expectExit(try world.run(["prune", "dav:backups", "--keep-last", "1", "--password-file", pw]), 0)
            #expect(!FileManager.default.fileExists(atPath: deadLock))
        }
    }

    @Test("prune REMOTE:DIR keeps what the policy says, verifies the newest first, and leaves another home's archives alone")
    func pruneRemote() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let world = try RemoteWorld(s)
            var made: [String] = []
            for _ in 0..<3 {
                let run = try world.run(["create", "--portable", "--output-dir", "sf:backups", "--password-file", pw, "--json"] + fastKDF)
                expectExit(run, 0)
                made.append(try #require(try jsonDocument(run)["archive"] as? String))
            }
            // Another home's archive in the same directory, dated later.
            expectExit(try world.run(["init"], home: "other"), 0)
            expectExit(try world.run(["vault", "add", try s.file("o.jpg", [1, 2])], home: "other"), 0)
            let otherPW = try s.passwordFile("another long password 42\n", name: "other-password")
            expectExit(try world.run(["create", "--portable", "-o", "sf:backups/n11archive-20991231T000000Z.nu11vlt",
                                      "--password-file", otherPW] + fastKDF, home: "other"), 0)
            let pruned = try world.run(["prune", "sf:backups", "--keep-last", "2", "--password-file", pw, "--json"])
            expectExit(pruned, 0)
            let document = try jsonDocument(pruned)
            #expect(document["verified"] as? String == made[2])
            #expect(document["deleted"] as? [String] == [made[0]])
            #expect((document["notOpened"] as? [String])?.count == 1)
            let names = Set(world.stored)
            #expect(!names.contains(String(made[0].split(separator: "/").last!)))
            #expect(names.contains("n11archive-20991231T000000Z.nu11vlt"))
            #expect(names.allSatisfy { !$0.hasPrefix(".n11archive.lock") })
        }
    }
}

@Suite("n11archive CLI: an OpenSSH server through rclone's sftp backend", .serialized,
       .enabled(if: rcloneAvailable && sshdAvailable && geteuid() == 0,
                "needs rclone, OpenSSH's sshd and ssh-keygen (Scripts/setup installs them), and root to run sshd"))
struct OpenSSHRemoteTests {
    @Test("create --output-dir, archives, verify, restore and prune over sftp to a loopback sshd, with a checked host key")
    func sshd() throws {
        try withSandbox { s in
            let originals = try s.fillVault()
            let pw = try s.passwordFile()
            let keys = s.path("ssh")
            mkdir(keys, 0o700)
            for name in ["host", "user"] {
                let made = try ChildProcess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", "\(keys)/\(name)"]).0
                #expect(made.status == 0, "\(made.errorText)")
            }
            try writeBytes(try readBytes("\(keys)/user.pub"), to: "\(keys)/authorized_keys")
            mkdir("/run/sshd", 0o755)   // sshd's privilege separation directory
            let data = s.path("ssh-data")
            try FileManager.default.createDirectory(atPath: data + "/backups", withIntermediateDirectories: true)
            let server = try LoopbackServer { port in
                ["/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null", "-o", "ListenAddress=127.0.0.1", "-o", "Port=\(port)",
                 "-o", "HostKey=\(keys)/host", "-o", "AuthorizedKeysFile=\(keys)/authorized_keys", "-o", "PidFile=none",
                 "-o", "StrictModes=no", "-o", "PasswordAuthentication=no", "-o", "KbdInteractiveAuthentication=no",
                 "-o", "UsePAM=no", "-o", "PermitRootLogin=prohibit-password", "-o", "Subsystem=sftp internal-sftp"]
            }
            let hostKey = String(decoding: try readBytes("\(keys)/host.pub"), as: UTF8.self).split(separator: " ").prefix(2).joined(separator: " ")
            try writeBytes(Array("[127.0.0.1]:\(server.port) \(hostKey)\n".utf8), to: "\(keys)/known_hosts")
            let config = s.path("rclone-ssh.conf")
            try writeBytes(Array("""
                [ssh]
                type = sftp
                host = 127.0.0.1
                port = \(server.port)
                user = \(String(cString: getpwuid(geteuid()).pointee.pw_name))
                key_file = \(keys)/user
                known_hosts_file = \(keys)/known_hosts

                """.utf8), to: config)
            let environment = ["RCLONE_CONFIG": config]
            let dir = "ssh:\(data)/backups"
            var made: [String] = []
            for _ in 0..<2 {
                let run = try s.run(["create", "--portable", "--output-dir", dir, "--password-file", pw, "--json"] + fastKDF, environment: environment)
                expectExit(run, 0)
                made.append(try #require(try jsonDocument(run)["archive"] as? String))
                // OpenSSH runs sha1sum/md5sum for rclone: the remote's hash checks the upload.
                let upload = try jsonDocument(run)["upload"] as? [String: Any]
                let checkedBy = upload?["checkedBy"] as? String
                #expect(checkedBy == "sha1" || checkedBy == "md5", "\(String(describing: checkedBy))")
                #expect(upload?["streamed"] as? Bool == true, "rclone's sftp backend takes a stream: \(String(describing: upload))")
            }
            expectExit(try s.run(["archives", dir], environment: environment), 0)
            expectExit(try s.run(["verify", made[1], "--password-file", pw], environment: environment), 0)
            let export = s.path("ssh-export")
            expectExit(try s.run(["restore", made[1], "--password-file", pw, "--export", export], environment: environment), 0)
            for (file, bytes) in originals {
                #expect(try readBytes("\(export)/\(file.hasSuffix(".txt") ? "Notes" : "Photos")/\(file)") == bytes, "\(file)")
            }
            expectExit(try s.run(["prune", dir, "--keep-last", "1", "--password-file", pw], environment: environment), 0)
            #expect(listing(of: data + "/backups") == [String(made[1].split(separator: "/").last!)])

            // A host key that does not match is refused before anything is sent.
            try writeBytes(Array("[127.0.0.1]:\(server.port) ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBq6WvRp0bWv1u1ZQ3wK6cN3y6k5yX3kUu3e2nRkU6bB\n".utf8),
                           to: "\(keys)/known_hosts")
            let spoofed = try s.run(["create", "--portable", "--output-dir", dir, "--password-file", pw] + fastKDF, environment: environment)
            #expect(spoofed.status != 0, "\(spoofed)")
            #expect(listing(of: data + "/backups").count == 1)
        }
    }
}

@Suite("n11archive CLI: a full remote", .serialized,
       .enabled(if: rcloneAvailable && TinyFileSystem.mountingWorks, "needs rclone, root and permission to mount a tmpfs (CI has them)"))
struct FullRemoteTests {
    @Test("the server's disk fills during the upload: exit 74 naming the remote, no archive under a final name, the vault and the spool unchanged")
    func fullDisk() throws {
        try withSandbox { s in
            try s.initialize()
            expectExit(try s.run(["vault", "add", try s.file("big.jpg", randomBytes(6 << 20))]), 0)
            let pw = try s.passwordFile()
            let disk = try TinyFileSystem(at: s.path("tiny"), kilobytes: 2048)
            try FileManager.default.createDirectory(atPath: disk.path + "/backups", withIntermediateDirectories: true)
            let server = try LoopbackServer { ["rclone", "serve", "webdav", disk.path, "--addr", "127.0.0.1:\($0)"] }
            let config = s.path("rclone-full.conf")
            try writeBytes(Array("[full]\ntype = webdav\nurl = http://127.0.0.1:\(server.port)/\nvendor = other\n".utf8), to: config)
            let vaultBefore = s.tree(s.vault)
            let result = try s.run(["create", "--portable", "--output-dir", "full:backups", "--password-file", pw] + fastKDF,
                                   environment: ["RCLONE_CONFIG": config])
            expectExit(result, 74)
            #expect(result.err.contains("full:backups"), "\(result)")
            #expect(!listing(of: disk.path + "/backups").contains { $0.hasPrefix("n11archive-") }, "\(listing(of: disk.path + "/backups"))")
            #expect(s.tree(s.vault) == vaultBefore)
            #expect(listing(of: s.home + "/spool").isEmpty)
            server.kill()
        }
    }
}
