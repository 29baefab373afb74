import Foundation
import Glibc
import Synchronization
import Testing
@testable import N11Archiver
@testable import N11System
import N11TestSupport

/// How rclone's failures become n11archive's: each kind of message a real rclone prints (as
/// the loopback suites saw them) gets its exit kind and says what happened, without running
/// rclone (issue 26: these were reached only through whole commands against servers).
/// Serialized: two of its tests write a stand-in rclone and run it, and one test's script,
/// still open for writing while another's `posix_spawn` forks, can fail to start (ETXTBSY).
@Suite("Rclone failures, classified", .serialized)
struct RcloneClassifyTests {
    static let cases: [(status: Int32, text: String, kind: FailureKind, says: String)] = [
        (1, "2026/11/22 21:00:00 CRITICAL: Failed to create file system for \"nas:x\": didn't find section in config file", .configuration, "no remote named 'nas'"),
        (1, "2026/11/22 21:00:00 ERROR : x: Failed to copy: 401 Unauthorized", .authentication, "refused rclone's credentials"),
        (1, "2026/11/22 21:00:00 ERROR : x: Failed to copy: 507 Insufficient Storage", .ioFailure, "the remote is full"),
        (3, "2026/11/22 21:00:00 ERROR : : error listing: directory not found", .missingInput, "no such directory"),
        (4, "2026/11/22 21:00:00 ERROR : x: object not found", .missingInput, "no such file"),
        (1, "2026/11/22 21:00:00 ERROR : dial tcp 127.0.0.1:9: connect: connection refused", .ioFailure, "cannot reach the remote"),
        (1, "{\"level\":\"error\",\"msg\":\"Failed to copy: connection reset by peer\",\"time\":\"2026-11-22T21:00:00Z\"}", .ioFailure, "connection reset by peer"),
        (9, "2026/11/22 21:00:00 ERROR : something new", .ioFailure, "rclone failed (exit status 9): something new"),
    ]

    @Test("each message gets its kind and a message naming the remote", arguments: cases.indices)
    func classified(_ index: Int) {
        let (status, text, kind, says) = Self.cases[index]
        let error = Rclone.classify(ChildProcess.Outcome(status: status, errorText: text), subject: RemotePath(remote: "nas", path: "x"))
        #expect(error.kind == kind, "\(error)")
        #expect(error.description.contains(says) && error.description.contains("nas:x"), "\(error)")
    }

    @Test("a transfer's progress never passes the file's size, though rclone counts a retried transfer's bytes again")
    func progressCapped() throws {
        let dir = NSTemporaryDirectory() + "/n11-rclone-fake-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A stand-in rclone that reports 250 bytes moved for a 100-byte file, then succeeds.
        let fake = dir + "/rclone"
        try writeBytes(Array("#!/bin/sh\necho '{\"stats\":{\"bytes\":250}}' >&2\nexit 0\n".utf8), to: fake)
        chmod(fake, 0o755)
        let seen = Mutex<[ArchiveProgress.Snapshot]>([])
        let progress = ArchiveProgress(interval: 0) { snapshot in seen.withLock { $0.append(snapshot) } }
        try Rclone(environment: ["N11_RCLONE": fake]).download(RemotePath(remote: "nas", path: "x"), to: dir + "/x", progress: progress, size: 100)
        let last = try #require(seen.withLock { $0.last })
        #expect(last.finished && last.bytes == 100 && last.totalBytes == 100, "\(last)")
    }

    /// A stand-in rclone whose object outlives the first `survives` deletes (a server still
    /// finishing an upload), and that counts them; `lsjson` lists it while it is there.
    func fakeRemote(in dir: String, survives: Int, answers: Bool = true) throws -> String {
        let fake = dir + "/rclone"
        let script = """
            #!/bin/sh
            cd '\(dir)'
            case "$1" in
            deletefile) n=$(cat deletes 2>/dev/null || echo 0); n=$((n + 1)); echo $n > deletes
                [ $n -gt \(survives) ] && rm -f object; exit 0 ;;
            lsjson) \(answers ? "" : "exit 1;") [ -e object ] && { echo '[{"Name":"x","Size":1}]'; exit 0; }
                echo 'ERROR : x: object not found' >&2; exit 3 ;;
            esac
            exit 9
            """
        try writeBytes(Array(script.utf8), to: fake)
        chmod(fake, 0o755)
        try writeBytes([1], to: dir + "/object")
        return fake
    }

    @Test("Ctrl-C's delete of a temp object deletes again while the object is still listed, a few times at most, and once when the remote does not answer",
          arguments: [(0, true, 1), (1, true, 2), (2, true, 3), (10, true, Rclone.deleteAttempts), (10, false, 1)])
    func deleteOnInterruptRetries(survives: Int, answers: Bool, deletes: Int) throws {
        let dir = NSTemporaryDirectory() + "/n11-rclone-delete-\(getpid())-\(survives)-\(answers)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fake = try fakeRemote(in: dir, survives: survives, answers: answers)
        Rclone(environment: ["N11_RCLONE": fake]).deleteOnInterrupt(RemotePath(remote: "nas", path: "x"))
        let count = try String(decoding: readBytes(dir + "/deletes"), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(count == "\(deletes)")
        #expect(exists(dir + "/object") == (survives >= deletes))
    }

    @Test("a remote path's directory and back: the root stays the root, not the login directory")
    func parentAndName() throws {
        for text in ["sftp:/a.nu11vlt", "nas:a.nu11vlt", "nas:dir/a.nu11vlt", "nas:/srv/b/a.nu11vlt"] {
            let path = try #require(RemotePath.parse(text))
            #expect(path.parent.appending(path.name).description == text)
        }
        #expect(RemotePath.parse("sftp:/a.nu11vlt")?.parent.description == "sftp:/")
        #expect(RemotePath.parse("nas:a.nu11vlt")?.parent.description == "nas:")
    }

    @Test("a time whose milliseconds read 403 is not a refusal")
    func timeIsNotAStatus() {
        let error = Rclone.classify(ChildProcess.Outcome(status: 1, errorText: "2026/11/22 21:00:00.403 ERROR : x: connection refused"),
                                    subject: RemotePath(remote: "nas", path: "x"))
        #expect(error.kind == .ioFailure, "\(error)")
    }
}
