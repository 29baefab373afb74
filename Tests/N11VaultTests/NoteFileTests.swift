import Foundation
import Glibc
import Testing
import N11System
import N11TestSupport
import N11Vault

/// `InputFile.readNote(at:)`, how `vault add --note` reads each file in its second pass: one
/// opening that checks the opened file and reads it whole. It must refuse what `check`
/// refuses, with the same errors, and never wait on a FIFO put in a note's place.
@Suite("Note files read in one opening")
struct NoteFileTests {
    /// The error a throwing call gave, as text (VaultError's cases carry the path).
    private static func failure(_ body: () throws -> Any) -> String? {
        do { _ = try body(); return nil } catch { return "\(error)" }
    }

    @Test("read ahead with a limit: a note up to it is read, a larger one is left for its turn, and a bad one still fails")
    func readAheadLimit() throws {
        try withTemporaryDirectory { dir in
            let small = dir + "/small.txt", large = dir + "/large.txt", binary = dir + "/binary.txt"
            try writeBytes(Array(repeating: UInt8(ascii: "a"), count: 1_000), to: small)
            try writeBytes(Array(repeating: UInt8(ascii: "b"), count: 1_001), to: large)
            try writeBytes([0xFF, 0xFE], to: binary)
            #expect(try InputFile.readNote(at: small, ifAtMost: 1_000)?.bytes.count == 1_000)
            #expect(try InputFile.readNote(at: large, ifAtMost: 1_000) == nil)
            #expect(try InputFile.readNote(at: large).bytes.count == 1_001)
            #expect(Self.failure { try InputFile.readNote(at: binary, ifAtMost: 1_000) as Any } == "\(VaultError.noteNotText(path: binary))")
            let missing = dir + "/missing"
            #expect(Self.failure { try InputFile.readNote(at: missing, ifAtMost: 1_000) as Any } == "\(VaultError.inputMissing(path: missing))")
        }
    }

    @Test("a note's bytes, name, size and modification time, through a symlink as check follows it")
    func readsNote() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/shopping.txt"
            try writeBytes(Array("milk, eggs, bread\n".utf8), to: path)
            var times = [timespec(tv_sec: 1_600_000_000, tv_nsec: 0), timespec(tv_sec: 1_600_000_000, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
            let link = dir + "/link.txt"
            #expect(symlink(path, link) == 0)
            for (given, name) in [(path, "shopping.txt"), (link, "link.txt")] {
                let note = try InputFile.readNote(at: given)
                #expect(note.bytes == Array("milk, eggs, bread\n".utf8))
                #expect(note.file.name == name)
                #expect(note.file.size == 18)
                #expect(note.file.asNote)
                #expect(note.file.modified == Date(timeIntervalSince1970: 1_600_000_000))
                let checked = try InputFile.check(given, asNote: true)
                #expect(checked.modified == note.file.modified && checked.size == note.file.size && checked.name == note.file.name)
            }
        }
    }

    @Test("a note file added is created at its modification time, and a second file with its content is skipped as a duplicate")
    func noteFileAdded() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            var times = [timespec(tv_sec: 1_500_000_000, tv_nsec: 0), timespec(tv_sec: 1_500_000_000, tv_nsec: 0)]
            for name in ["a.txt", "copy.txt"] {
                try writeBytes(Array("the same words".utf8), to: dir + "/" + name)
                #expect(utimensat(AT_FDCWD, dir + "/" + name, &times, 0) == 0)
            }
            let first = try InputFile.readNote(at: dir + "/a.txt")
            let added = try vault.add(.init(note: first, name: first.file.name, compartment: .vault, expires: nil))
            #expect(added.kind == .note && added.name == "a.txt" && added.size == 14)
            #expect(added.created == Date(timeIntervalSince1970: 1_500_000_000))
            let copy = try InputFile.readNote(at: dir + "/copy.txt")
            var skipped: [String] = []
            let second = try vault.add([.init(note: copy, name: copy.file.name, compartment: .vault, expires: nil)],
                                       skippingDuplicates: true, skipped: { skipped.append("\($0.name) -> \($0.existing.id)") })
            #expect(second.isEmpty)
            #expect(skipped == ["copy.txt -> \(added.id)"])
            let collected = CollectingSink()
            try vault.read(added, into: collected)
            #expect(collected.bytes == Array("the same words".utf8))
        }
    }

    @Test("what check refuses, reading refuses with the same error; a FIFO is refused without waiting for a writer")
    func refusesWhatCheckRefuses() throws {
        try withTemporaryDirectory { dir in
            let missing = dir + "/missing.txt"
            let folder = dir + "/folder"
            #expect(mkdir(folder, 0o700) == 0)
            let fifo = dir + "/fifo"
            #expect(mkfifo(fifo, 0o600) == 0)
            let large = dir + "/large.txt"
            let fd = open(large, O_CREAT | O_WRONLY | O_EXCL, 0o600)
            #expect(fd >= 0 && ftruncate(fd, off_t(Vault.maximumNoteSize + 1)) == 0)
            close(fd)
            // Read on a thread of its own, so that an open that waits for a writer fails the
            // test instead of hanging it (a writer then lets it through).
            let done = NSCondition()
            nonisolated(unsafe) var returned = false
            Thread.detachNewThread {
                _ = try? InputFile.readNote(at: fifo)
                done.lock(); returned = true; done.signal(); done.unlock()
            }
            done.lock()
            let deadline = Date().addingTimeInterval(5)
            while !returned && done.wait(until: deadline) {}
            let inTime = returned
            done.unlock()
            #expect(inTime, "reading the FIFO waited for a writer")
            if !inTime {
                let writer = open(fifo, O_WRONLY | O_NONBLOCK)
                done.lock(); while !returned { done.wait() }; done.unlock()
                close(writer)
            }
            // A socket does not open at all (ENXIO): the error is still check's.
            let socketPath = dir + "/socket"
            let sock = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (i, byte) in socketPath.utf8.enumerated() { raw[i] = byte }
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(sock, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            #expect(sock >= 0 && bound == 0)
            defer { close(sock) }
            for path in [missing, folder, large, socketPath] + (inTime ? [fifo] : []) {
                let read = try #require(Self.failure { try InputFile.readNote(at: path) }, "\(path) was read as a note")
                let checked = try #require(Self.failure { try InputFile.check(path, asNote: true) })
                #expect(read == checked, "\(path)")
                #expect(read.contains(path))
            }
            // A file of the right size that is not UTF-8 text.
            let binary = dir + "/binary.txt"
            try writeBytes([0xff, 0xfe, 0x00, 0x80], to: binary)
            #expect(Self.failure { try InputFile.readNote(at: binary) } == "\(VaultError.noteNotText(path: binary))")
        }
    }
}
