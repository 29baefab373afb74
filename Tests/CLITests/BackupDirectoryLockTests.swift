import Foundation
import Glibc
import Testing
import N11TestSupport

/// `create --output-dir` and `prune` exclude each other through a 0600 lock file of the
/// user's in the backup directory, not a flock on the directory itself, which anyone who can
/// read the directory can take.
@Suite("The backup directory's lock: a file of the user's, not the directory")
struct BackupDirectoryLockTests {
    @Test("a flock held on the directory by another process blocks neither create --output-dir nor prune")
    func directoryFlockDoesNotBlock() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let dir = s.path("backups")
            #expect(mkdir(dir, 0o755) == 0)
            _ = try s.datedArchives(1, in: dir, password: pw)
            // What a hostile local user can do to a directory they can read: open it and
            // flock it (here this test process plays that user).
            let fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            #expect(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
            defer { close(fd) }

            expectExit(try s.run(["create", "--portable", "--output-dir", dir, "--password-file", pw] + fastKDF), 0)
            expectExit(try s.run(["prune", dir, "--keep-last", "1", "--password-file", pw]), 0)
            #expect(listing(of: dir).filter(isDatedArchiveName).count == 1, "\(listing(of: dir))")
            #expect(listing(of: dir).contains(".n11archive.lock"))
            var st = stat()
            #expect(lstat(dir + "/.n11archive.lock", &st) == 0 && st.st_mode & 0o777 == 0o600 && st.st_uid == geteuid())
        }
    }

    @Test("a lock file planted by another user, or a link in its place, is refused and nothing is written or deleted")
    func plantedLockFileRefused() throws {
        try withSandbox { s in
            _ = try s.fillVault()
            let pw = try s.passwordFile()
            let dir = s.path("backups")
            #expect(mkdir(dir, 0o755) == 0)
            let archives = try s.datedArchives(2, in: dir, password: pw)
            let lock = dir + "/.n11archive.lock"
            #expect(unlink(lock) == 0)

            try writeBytes([], to: lock)
            #expect(chown(lock, 65534, 65534) == 0)
            let create = try s.run(["create", "--portable", "--output-dir", dir, "--password-file", pw] + fastKDF)
            expectExit(create, 78)
            #expect(create.err.contains(lock) && create.err.contains("uid 65534"), "\(create)")
            let prune = try s.run(["prune", dir, "--keep-last", "1", "--password-file", pw])
            expectExit(prune, 78)
            #expect(Set(listing(of: dir).filter(isDatedArchiveName)) == Set(archives.map(lastComponent)))

            #expect(unlink(lock) == 0)
            let target = s.path("elsewhere")
            try writeBytes(Array("keep".utf8), to: target)
            #expect(symlink(target, lock) == 0)
            let linked = try s.run(["prune", dir, "--keep-last", "1", "--password-file", pw])
            #expect(linked.status != 0, "\(linked)")
            #expect(try readBytes(target) == Array("keep".utf8))
            #expect(Set(listing(of: dir).filter(isDatedArchiveName)) == Set(archives.map(lastComponent)))
        }
    }
}

/// The key store is opened without following links and checked on the descriptor; the
/// directories above it must not let another user move it aside.
@Suite("The key store's place: no links, no directory above it open to others")
struct KeyStorePlaceTests {
    @Test("a home under a directory writable by others (no sticky bit), or another user's, is refused; a sticky one is fine")
    func unsafeAncestors() throws {
        try withSandbox { s in
            let shared = s.path("shared")
            #expect(mkdir(shared, 0o755) == 0)
            let home = shared + "/home"
            let env = ["N11_HOME": home]
            expectExit(try s.run(["init"], environment: env), 0)
            expectExit(try s.run(["vault", "list"], environment: env), 0)

            #expect(chmod(shared, 0o777) == 0)
            let open = try s.run(["vault", "list"], environment: env)
            expectExit(open, 78)
            #expect(open.err.contains("'\(shared)'") && open.err.contains("chmod go-w"), "\(open)")
            // init refuses such a place too, and leaves no home behind.
            let newHome = shared + "/new-home"
            expectExit(try s.run(["init"], environment: ["N11_HOME": newHome]), 78)
            #expect(!exists(newHome))

            #expect(chmod(shared, 0o1777) == 0)
            expectExit(try s.run(["vault", "list"], environment: env), 0)

            #expect(chmod(shared, 0o755) == 0 && chown(shared, 65534, 65534) == 0)
            let foreign = try s.run(["vault", "list"], environment: env)
            expectExit(foreign, 78)
            #expect(foreign.err.contains("uid 65534"), "\(foreign)")
            #expect(chown(shared, geteuid(), getegid()) == 0)
            expectExit(try s.run(["vault", "list"], environment: env), 0)
        }
    }

    @Test("a key store that is a link to a real key store is refused")
    func linkedKeyStore() throws {
        try withSandbox { s in
            try s.initialize()
            let real = s.home + "/keystore.n11keys"
            let moved = s.path("elsewhere.n11keys")
            #expect(rename(real, moved) == 0 && symlink(moved, real) == 0)
            let linked = try s.run(["vault", "list"])
            expectExit(linked, 78)
            #expect(linked.err.contains("not a regular file"), "\(linked)")
        }
    }
}
