import Foundation
import Glibc
import Synchronization
import Testing
@testable import N11System
import N11TestSupport

/// Direct tests of the POSIX layer's pieces that the higher layers and the CLI suites only
/// reached through whole commands (issue 26): directories opened without following links,
/// locks, atomic files, child processes, and the permission rules for shared places.
@Suite("N11System pieces, tested directly")
struct SystemPiecesTests {
    func scratch(_ body: (String) throws -> Void) throws {
        var template = Array((NSTemporaryDirectory() + "/n11-system-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        let dir = try #require(made.map { String(cString: $0) })
        defer { _ = try? FileManager.default.removeItem(atPath: dir) }
        try body(dir)
    }

    /// Writes 20,000 bytes to `path` and drops them from the page cache (the hint tests).
    func writeOutOfCache(_ path: String) throws {
        try Data(repeating: 7, count: 20_000).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        #expect(fsync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
        close(fd)
        try #require(try residentPages(path).resident == 0, "this file system keeps pages after POSIX_FADV_DONTNEED; the test cannot tell")
    }

    /// Waits, 3 s at most, until every one of `paths` has a page in the cache again (the
    /// reads a hint starts are the kernel's).
    func waitUntilCached(_ paths: [String]) throws {
        var waited = 0
        while try paths.contains(where: { try residentPages($0).resident == 0 }), waited < 300 {
            usleep(10_000)
            waited += 1
        }
    }

    func write(_ path: String, _ text: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    @Test("FileSystemSync: syncs through the descriptor it opened first, not the path; its writeback thread ends with sync or stop")
    func fileSystemSync() throws {
        try scratch { dir in
            #expect(mkdir(dir + "/v", 0o700) == 0 && mkdir(dir + "/x", 0o700) == 0)
            let sync = try FileSystemSync(containing: dir + "/v")
            let handle = try DirectoryHandle.open(dir + "/x")
            let fromHandle = try handle.fileSystemSync()
            // Both directories gone from the names they were opened by: a sync that looked the
            // path up again (and so missed writeback errors from before it, see the type)
            // would fail here.
            #expect(rename(dir + "/v", dir + "/v2") == 0 && rename(dir + "/x", dir + "/x2") == 0)
            try write(dir + "/v2/file", "written")

            #expect(!sync.isWritingBack)
            sync.startWriteback()
            sync.startWriteback()   // idempotent
            fromHandle.startWriteback()
            #expect(sync.isWritingBack && fromHandle.isWritingBack)
            try sync.sync()
            #expect(!sync.isWritingBack, "sync() left its writeback thread running")
            fromHandle.stopWriteback()
            fromHandle.stopWriteback()
            #expect(!fromHandle.isWritingBack)
            try fromHandle.sync()
        }
    }

    @Test("DirectoryHandle: a link in place of a subdirectory is refused; renameat2 without replacing leaves both files")
    func directoryHandle() throws {
        try scratch { dir in
            #expect(mkdir(dir + "/real", 0o700) == 0 && symlink(dir + "/real", dir + "/link") == 0)
            let handle = try DirectoryHandle.open(dir)
            #expect(throws: SystemError.self) { _ = try handle.openSubdirectory("link") }
            #expect(throws: SystemError.self) { _ = try DirectoryHandle.open(dir + "/link") }
            #expect(try DirectoryHandle.open(dir + "/link", followingLink: true).status().kind == .directory)
            #expect(try handle.status(of: "missing") == nil)

            try write(dir + "/a", "a")
            try write(dir + "/b", "b")
            do {
                try DirectoryHandle.rename("a", in: handle, to: "b", in: handle, .noReplace)
                Issue.record("a rename without replacing replaced b")
            } catch let error as SystemError {
                #expect(error.errno == EEXIST)
            }
            #expect(try String(contentsOfFile: dir + "/b", encoding: .utf8) == "b" && FileManager.default.fileExists(atPath: dir + "/a"))
            try DirectoryHandle.rename("a", in: handle, to: "b", in: handle, .exchange)
            #expect(try String(contentsOfFile: dir + "/b", encoding: .utf8) == "a")
        }
    }

    @Test("DirectoryHandle.removePrivateTree removes a real tree of the user's, never through a link")
    func removePrivateTree() throws {
        try scratch { dir in
            #expect(mkdir(dir + "/tree", 0o700) == 0 && mkdir(dir + "/tree/sub", 0o700) == 0)
            try write(dir + "/tree/sub/f", "x")
            #expect(mkdir(dir + "/victim", 0o700) == 0)
            try write(dir + "/victim/keep", "keep")
            #expect(symlink(dir + "/victim", dir + "/planted") == 0)
            let handle = try DirectoryHandle.open(dir)
            #expect(handle.removePrivateTree("tree"))
            #expect(!FileManager.default.fileExists(atPath: dir + "/tree"))
            #expect(!handle.removePrivateTree("planted"))
            #expect(FileManager.default.fileExists(atPath: dir + "/victim/keep"))
        }
    }

    @Test("removePrivateTree removes thousands of files as it lists them; what it cannot remove ends it instead of looping")
    func removePrivateTreeInBatches() throws {
        try scratch { dir in
            #expect(mkdir(dir + "/big", 0o700) == 0)
            let count = 5_000
            for n in 0..<count { try write(dir + "/big/f\(n)", "") }
            #expect(mkdir(dir + "/big/sub", 0o700) == 0)
            try write(dir + "/big/sub/g", "g")
            let handle = try DirectoryHandle.open(dir)
            #expect(handle.removePrivateTree("big"))
            #expect(!FileManager.default.fileExists(atPath: dir + "/big"))

            // Another user's directory inside cannot be entered: the rest goes, it stays.
            #expect(mkdir(dir + "/mixed", 0o700) == 0 && mkdir(dir + "/mixed/theirs", 0o700) == 0)
            try write(dir + "/mixed/theirs/x", "x")
            #expect(chown(dir + "/mixed/theirs", 65534, 65534) == 0)
            for n in 0..<3_000 { try write(dir + "/mixed/f\(n)", "") }
            #expect(!handle.removePrivateTree("mixed"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/mixed") == ["theirs"])
        }
    }

    @Test("DirectoryHandle.entries(where:) lists only what the filter takes; forEachEntry sees every name once")
    func filteredEntries() throws {
        try scratch { dir in
            for name in ["a.tmp", "b", "c.tmp", ".hidden"] { try write(dir + "/" + name, "") }
            let handle = try DirectoryHandle.open(dir)
            #expect(Set(try handle.entries(where: { $0.hasSuffix(".tmp") })) == ["a.tmp", "c.tmp"])
            var seen: [String] = []
            try handle.forEachEntry { seen.append($0) }
            #expect(seen.sorted() == [".hidden", "a.tmp", "b", "c.tmp"])
        }
    }

    @Test("HintedPaths hands back every path once, in order, across batches; a path that cannot be opened is only passed on")
    func hintedPaths() throws {
        try scratch { dir in
            var paths = (0..<(HintedPaths.batch * 3 + 5)).map { dir + "/f\($0)" }
            for path in paths.prefix(10) { try write(path, "x") }
            paths.insert(dir + "/missing", at: 3)
            var source = paths.makeIterator()
            var hinted = HintedPaths()
            var handed: [String] = []
            while let path = hinted.next(from: { source.next() }) { handed.append(path) }
            #expect(handed == paths)
            // Once done, it stays done without asking its source again.
            var asked = false
            #expect(hinted.next(from: { asked = true; return dir + "/late" }) == nil)
            #expect(!asked)
        }
    }

    @Test("ReadAheadPaths gives each path's result once, in order, worked on other threads at most threads + 1 batches ahead of the caller",
          arguments: [0, 1, ReadAheadPaths<Int>.batch, ReadAheadPaths<Int>.batch * 5 + 3, ReadAheadPaths<Int>.batch * 9 + 5],
          [1, 4])
    func readAheadPaths(count: Int, threads: Int) throws {
        let worked = Counter()
        let callerThread = pthread_self()
        let onOtherThread = Counter()
        let workers = Mutex<Set<UInt>>([])
        let reader = ReadAheadPaths<String>(threads: threads) { path in
            worked.bump()
            if pthread_equal(pthread_self(), callerThread) == 0 { onOtherThread.bump() }
            workers.withLock { _ = $0.insert(UInt(pthread_self())) }
            return "read " + path
        }
        var source = (0..<count).map { "p\($0)" }.makeIterator()
        var results: [String] = []
        while let result = reader.next(from: { source.next() }) {
            results.append(result)
            if results.count == 1 {
                // The caller's batch and the threads + 1 after it, and no more while it is on the first.
                let ahead = min(count, (threads + 2) * ReadAheadPaths<Int>.batch)
                let deadline = Date().addingTimeInterval(10)
                while worked.count < ahead && Date() < deadline { usleep(1000) }
                usleep(20_000)
                #expect(worked.count == ahead)
            }
        }
        #expect(results == (0..<count).map { "read p\($0)" })
        #expect(worked.count == count && onOtherThread.count == count)
        // Each thread took a batch in turn: as many threads worked as there were batches, up to `threads`.
        let batches = (count + ReadAheadPaths<Int>.batch - 1) / ReadAheadPaths<Int>.batch
        #expect(workers.withLock { $0.count } == min(threads, batches))
        var asked = false
        #expect(reader.next(from: { asked = true; return "late" }) == nil)
        #expect(!asked)
    }

    /// A counter a job on another thread can bump.
    final class Counter: Sendable {
        let value = Atomic<Int>(0)
        var count: Int { value.load(ordering: .relaxed) }
        func bump() { value.add(1, ordering: .relaxed) }
    }

    @Test("Interruption.alongside: sections on two threads run at the same time (files made on a writer thread and the caller's)")
    func alongsideSections() throws {
        // A thread inside an `alongside` section waits there until the main thread, in a
        // section of its own, says it got in: exclusive sections would never meet.
        let inside = Counter(), metThere = Counter(), sawIt = Counter()
        let other = try #require(BackgroundThread { _ in
            Interruption.alongside {
                inside.bump()
                let deadline = Date().addingTimeInterval(10)
                while metThere.count == 0 && Date() < deadline { usleep(1000) }
                if metThere.count > 0 { sawIt.bump() }
            }
        })
        while inside.count == 0 { usleep(1000) }
        Interruption.alongside { metThere.bump() }
        other.wait()
        #expect(sawIt.count == 1, "the second section waited for the first to end")
    }

    @Test("BackgroundThread runs its job beside the caller until told to stop, then waits for it")
    func backgroundThread() throws {
        let steps = Counter()
        let thread = try #require(BackgroundThread { stopped in
            while !stopped() { steps.bump(); usleep(1000) }
        })
        while steps.count < 3 { usleep(1000) }
        thread.stop()
        let seen = steps.count
        usleep(20_000)
        #expect(steps.count == seen, "the job went on after stop() returned")
        thread.stop()

        // A job that ends by itself is waited for.
        let done = Counter()
        let finite = try #require(BackgroundThread { _ in usleep(20_000); done.bump() })
        finite.wait()
        #expect(done.count == 1)

        // Stopped without waiting: the caller goes on while a long step ends by itself.
        let slow = Counter(), ended = Counter()
        let long = try #require(BackgroundThread { stopped in
            slow.bump()
            usleep(300_000)   // a syncfs of a slow disk
            if stopped() { ended.bump() }
        })
        while slow.count == 0 { usleep(1000) }
        let start = Date()
        long.stopWithoutWaiting()
        #expect(Date().timeIntervalSince(start) < 0.2, "stopWithoutWaiting waited for the step")
        #expect(ended.count == 0)
        var waited = 0
        while ended.count == 0, waited < 200 { usleep(10_000); waited += 1 }
        #expect(ended.count == 1, "the job did not see the stop and end by itself")
        long.stop()   // idempotent after it: nothing to wait for
    }

    @Test("HintThread for files from elsewhere never opens a FIFO: a writer waiting on it is not let through")
    func hintThreadLeavesFIFOs() throws {
        try scratch { dir in
            let fifo = dir + "/fifo", sentinel = dir + "/after"
            #expect(mkfifo(fifo, 0o600) == 0)
            try Data(repeating: 7, count: 20_000).write(to: URL(fileURLWithPath: sentinel))
            let fd = open(sentinel, O_RDONLY)
            #expect(fsync(fd) == 0 && posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0)
            close(fd)
            try #require(try residentPages(sentinel).resident == 0, "this file system keeps pages after POSIX_FADV_DONTNEED; the test cannot tell")
            let writerThrough = NSCondition()
            nonisolated(unsafe) var through = false
            Thread.detachNewThread {
                let fd = open(fifo, O_WRONLY)   // waits for a reader
                writerThrough.lock(); through = true; writerThrough.signal(); writerThrough.unlock()
                if fd >= 0 { close(fd) }
            }
            usleep(100_000)   // the writer is waiting in open() before the hints run
            let hints = HintThread(files: .fromElsewhere)
            hints.hint([fifo, sentinel])
            // The FIFO's hint came first: once the file after it is in the cache, it is done.
            var waited = 0
            while try residentPages(sentinel).resident == 0, waited < 200 {
                usleep(10_000)
                waited += 1
            }
            hints.finish()
            #expect(try residentPages(sentinel).resident > 0, "the hints did not reach the file after the FIFO")
            usleep(100_000)
            writerThrough.lock(); let early = through; writerThrough.unlock()
            #expect(!early, "the hint opened the FIFO")
            let reader = open(fifo, O_RDONLY | O_NONBLOCK)
            writerThrough.lock()
            while !through { writerThrough.wait() }
            writerThrough.unlock()
            close(reader)
        }
    }

    @Test("HintThread asks the kernel for each file handed to it: files out of the cache come back into it",
          arguments: [HintThread.Files.own, .fromElsewhere])
    func hintThread(files: HintThread.Files) throws {
        try scratch { dir in
            let paths = (0..<8).map { dir + "/note\($0)" }
            for path in paths { try writeOutOfCache(path) }
            let hints = HintThread(files: files)
            hints.hint(Array(paths.prefix(2)))   // replaced by the next batch, or hinted first
            hints.hint(paths)
            try waitUntilCached(paths)
            hints.finish()
            hints.finish()
            for path in paths { #expect(try residentPages(path).resident > 0, "\(path) was not hinted") }
        }
    }

    @Test("HintPacing: runs of files all in the cache let ever more paths go unhinted; one file out of it starts over")
    func hintPacing() {
        var pacing = HintPacing()
        func shouldHint() -> Bool { pacing.shouldHint() }
        func probe(cachedExcept outside: Int? = nil) {
            for n in 0..<HintPacing.probe {
                #expect(shouldHint())
                pacing.hinted(wasCached: n != outside)
            }
        }
        func expectSkipped(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) {
            for _ in 0..<count { #expect(!shouldHint(), sourceLocation: sourceLocation) }
            #expect(shouldHint(), sourceLocation: sourceLocation)
            pacing.hinted(wasCached: false)   // the next probe's first file, out of the cache
        }
        // A cold probe: every path is hinted, the next probe too.
        probe(cachedExcept: 17)
        probe()
        expectSkipped(HintPacing.firstSkip)
        // That probe's first file was out of the cache: no skip after it, and the next
        // warm run skips `firstSkip` again, then twice that, up to the longest.
        for _ in 1..<HintPacing.probe {
            #expect(shouldHint())
            pacing.hinted(wasCached: true)
        }
        probe()
        expectSkipped(HintPacing.firstSkip)
        for _ in 1..<HintPacing.probe { #expect(shouldHint()); pacing.hinted(wasCached: nil) }
        var skip = HintPacing.firstSkip
        for _ in 0..<6 {
            probe()
            for _ in 0..<skip { #expect(!shouldHint()) }
            skip = min(2 * skip, HintPacing.longestSkip)
        }
        #expect(skip == HintPacing.longestSkip)
        probe()
        for _ in 0..<HintPacing.longestSkip { #expect(!shouldHint()) }
        #expect(shouldHint())
    }

    @Test("hintOwnUnlessCached tells a cached file from one out of the cache, and asks the kernel for the latter")
    func hintUnlessCached() throws {
        try scratch { dir in
            let cold = dir + "/cold", warm = dir + "/warm"
            try writeOutOfCache(cold)
            try Data(repeating: 8, count: 20_000).write(to: URL(fileURLWithPath: warm))
            let wasCold = try #require(InputPrefetch.hintOwnUnlessCached(cold), "the kernel cannot tell (RWF_NOWAIT) here")
            #expect(!wasCold)
            try waitUntilCached([cold])
            #expect(try residentPages(cold).resident > 0, "the file out of the cache was not hinted")
            #expect(InputPrefetch.hintOwnUnlessCached(warm) == true)
            #expect(InputPrefetch.hintOwnUnlessCached(dir + "/missing") == nil)
        }
    }

    @Test("a paced HintThread hints the paths added from several calls, in order, while they are out of the cache")
    func pacedHintThread() throws {
        try scratch { dir in
            let paths = (0..<(HintPacing.probe + 8)).map { dir + "/note\($0)" }
            for path in paths { try writeOutOfCache(path) }
            let hints = HintThread(files: .own, paced: true)
            // Two lanes' segments: added, not replacing each other.
            hints.add(Array(paths.prefix(40)))
            hints.add(Array(paths.dropFirst(40)))
            try waitUntilCached(paths)
            hints.finish()
            for path in paths { #expect(try residentPages(path).resident > 0, "\(path) was not hinted") }
        }
    }

    @Test("a HintThread that falls behind a pass holds at most addedAhead paths, the last ones added")
    func hintThreadDropsStalePaths() {
        // A thread that never got to run while 50 batches of 1,000 were added.
        var (pending, next) = ([String](), 0)
        for batch in 0..<50 {
            (pending, next) = HintThread.waiting(after: (0..<1000).map { "b\(batch)-\($0)" }, addedTo: pending, hinted: next)
            #expect(pending.count <= HintThread.addedAhead + 1000)
            #expect(pending.count - next == min(1000 * (batch + 1), HintThread.addedAhead))
        }
        #expect(pending.last == "b49-999" && pending[next] == "b45-904")
        // What the thread hinted goes at the next add; the rest stays in order.
        (pending, next) = HintThread.waiting(after: ["new"], addedTo: pending, hinted: pending.count - 2)
        #expect(pending == ["b49-998", "b49-999", "new"] && next == 0)
    }

    @Test("FileLock: a second taker is told who holds it; after release it is free")
    func fileLock() throws {
        try scratch { dir in
            let path = dir + "/.lock"
            guard case .acquired(let first) = try FileLock.acquire(path) else { Issue.record("not acquired"); return }
            switch try FileLock.acquire(path, shared: true) {
            case .heldBy(let pid): #expect(pid == getpid())
            case .acquired: Issue.record("a shared lock was taken beside an exclusive one")
            }
            first.release()
            guard case .acquired = try FileLock.acquire(path) else { Issue.record("released, but still held"); return }
            // A link in the lock's place is refused, not followed.
            #expect(unlink(path) == 0 && symlink(dir + "/elsewhere", path) == 0)
            #expect(throws: (any Error).self) { _ = try FileLock.acquire(path) }
            #expect(!FileManager.default.fileExists(atPath: dir + "/elsewhere"))
        }
    }

    @Test("AtomicFile: without replacing, an existing file stays and nothing of ours is left; abort leaves nothing")
    func atomicFile() throws {
        try scratch { dir in
            let target = dir + "/out"
            try write(target, "old")
            let file = try AtomicFile(path: target)
            try file.descriptor.write(Array("new".utf8))
            #expect(throws: SystemError.self) { try file.commit(replaceExisting: false) }
            #expect(try String(contentsOfFile: target, encoding: .utf8) == "old")
            let aborted = try AtomicFile(path: dir + "/other")
            aborted.abort()
            let left = try FileManager.default.contentsOfDirectory(atPath: dir)
            #expect(left == ["out"], "\(left)")
            let replacing = try AtomicFile(path: target)
            try replacing.descriptor.write(Array("new".utf8))
            try replacing.commit()
            #expect(try String(contentsOfFile: target, encoding: .utf8) == "new")
        }
    }

    @Test("ChildProcess: output, error text and status; a missing program is ENOENT; terminate ends a running one")
    func childProcess() throws {
        let (outcome, output) = try ChildProcess.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
        #expect(outcome.status == 3 && String(decoding: output, as: UTF8.self) == "out\n" && outcome.errorText.contains("err"))
        do {
            _ = try ChildProcess.start(["/nonexistent/program"])
            Issue.record("a missing program started")
        } catch let error as SystemError {
            #expect(error.errno == ENOENT)
        }
        let sleeper = try ChildProcess.start(["sleep", "30"])
        let started = Date()
        sleeper.terminate()
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(sleeper.wait().status == 128 + SIGTERM)
    }

    @Test("ChildProcess with a standard input: what we write it reads, closing the input ends it; a write after it died fails with EPIPE on a thread that blocks SIGPIPE, and the process lives")
    func childProcessInput() throws {
        let counter = try ChildProcess.start(["wc", "-c"], standardInput: true)
        let input = try #require(counter.input)
        try input.write([UInt8](repeating: 7, count: 200_000))   // more than a pipe holds: wc reads as we write
        counter.closeInput()
        let counted = try counter.output.readAll(limit: 100)
        #expect(counter.wait().status == 0)
        #expect(String(decoding: counted, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "200000")

        let quitter = try ChildProcess.start(["sh", "-c", "exit 4"], standardInput: true)
        let failed = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var writeError: SystemError? = nil
        Thread {
            ChildProcess.blockBrokenPipeSignalOnThisThread()
            // Until the shell has gone: then the write has no reader.
            for _ in 0..<500 {
                do { try quitter.input?.write([1, 2, 3]) } catch let error as SystemError { writeError = error; break } catch {}
                usleep(10_000)
            }
            failed.signal()
        }.start()
        #expect(failed.wait(timeout: .now() + 10) == .success)
        #expect(writeError?.errno == EPIPE, "\(String(describing: writeError))")
        #expect(quitter.wait().status == 4)
        // No input asked for: none made (the program reads /dev/null).
        #expect(try ChildProcess.start(["true"]).input == nil)
    }

    @Test("Shared places: a place others can write is refused to act in; a new place below a non-sticky shared directory too")
    func sharedPlaces() throws {
        try scratch { dir in
            #expect(mkdir(dir + "/open", 0o775) == 0 && chmod(dir + "/open", 0o775) == 0)
            let open = try #require(try FileStatus.of(dir + "/open"))
            #expect(throws: PrivatePermissions.Violation.self) { try PrivatePermissions.checkOnlyUserCanChange(dir + "/open", status: open) }
            #expect(chmod(dir + "/open", 0o755) == 0)
            try PrivatePermissions.checkOnlyUserCanChange(dir + "/open", status: try #require(try FileStatus.of(dir + "/open")))

            #expect(mkdir(dir + "/shared", 0o777) == 0 && chmod(dir + "/shared", 0o777) == 0)
            #expect(throws: PrivatePermissions.Violation.self) {
                try PrivatePermissions.checkAncestors(ofNew: dir + "/shared/a/b/vault", what: "your vault")
            }
            #expect(chmod(dir + "/shared", 0o1777) == 0)
            try PrivatePermissions.checkAncestors(ofNew: dir + "/shared/a/b/vault", what: "your vault")
        }
    }

    @Test("ShellCommand: the first line is read, then finish never waits for the rest: a writer gets SIGPIPE, a sleeper is killed")
    func shellCommand() throws {
        func firstLine(_ command: ShellCommand) throws -> String {
            var byte = [UInt8](repeating: 0, count: 1), line: [UInt8] = []
            while try command.output.read(into: &byte, count: 1) == 1, byte[0] != 0x0A { line.append(byte[0]) }
            return String(decoding: line, as: UTF8.self)
        }
        let quiet = try ShellCommand.start("echo secret; exit 4")
        #expect(try firstLine(quiet) == "secret")
        #expect(quiet.finish(gracePeriod: 5) == .exited(4))

        let endless = try ShellCommand.start("exec yes pw")
        #expect(try firstLine(endless) == "pw")
        #expect(endless.finish(gracePeriod: 5) == .signaled(SIGPIPE), "closing our end ends a writer, whatever our SIGPIPE disposition")

        let sleeper = try ShellCommand.start("echo pw; exec sleep 30")
        #expect(try firstLine(sleeper) == "pw")
        let started = Date()
        #expect(sleeper.finish(gracePeriod: 0.2) == .killedAfterGracePeriod)
        #expect(Date().timeIntervalSince(started) < 5)
    }

    @Test("SpawnAttributes: a child gets an empty signal mask and default dispositions although our thread blocks Ctrl-C")
    func childSignals() throws {
        var blocked = sigset_t(), previous = sigset_t()
        sigemptyset(&blocked)
        for signalNumber in Interruption.signals { sigaddset(&blocked, signalNumber) }
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        let (outcome, output) = try ChildProcess.run(["sh", "-c", "grep -E '^Sig(Blk|Ign):' /proc/self/status"])
        #expect(outcome.status == 0)
        let fields = Dictionary(uniqueKeysWithValues: String(decoding: output, as: UTF8.self).split(separator: "\n").map { line in
            let parts = line.split(separator: ":").map { $0.trimmingCharacters(in: .whitespaces) }
            return (parts[0], UInt64(parts[1], radix: 16) ?? .max)
        })
        #expect(fields["SigBlk"] == 0, "the mask that keeps signals for Interruption's thread is not inherited")
        let mustBeDefault = (Interruption.signals + [SIGPIPE]).reduce(UInt64(0)) { $0 | (1 << UInt64($1 - 1)) }
        #expect((fields["SigIgn"] ?? .max) & mustBeDefault == 0, "Ctrl-C, SIGTERM, SIGHUP and SIGPIPE are not ignored in a child")
        #expect(Interruption.name(of: SIGINT) == "Ctrl-C (SIGINT)" && Interruption.name(of: 99) == "signal 99")
    }

    @Test("AtomicFile's fallbacks without renameat2 (link, then unlink) and without hard links (check, then rename) never replace a file")
    func atomicFileFallbacks() throws {
        try scratch { dir in
            func unsupported(_ code: Int32) -> (String, String) -> Int32 { { _, _ in errno = code; return -1 } }
            let real: (String, String) -> Int32 = { link($0, $1) }
            for (name, hardLink) in [("by-link", real), ("by-check", unsupported(EPERM))] {
                let temp = dir + "/" + name + ".tmp", target = dir + "/" + name
                try write(temp, "new")
                try AtomicFile.publish(temp, to: target, replaceExisting: false, renameNoReplace: unsupported(ENOSYS), hardLink: hardLink)
                #expect(try String(contentsOfFile: target, encoding: .utf8) == "new" && !FileManager.default.fileExists(atPath: temp), "\(name)")
                // A second publish to the same name: refused (EEXIST), the first file kept, the temp file left to its owner.
                try write(temp, "newer")
                #expect(throws: SystemError.self, "\(name)") {
                    try AtomicFile.publish(temp, to: target, replaceExisting: false, renameNoReplace: unsupported(EINVAL), hardLink: hardLink)
                }
                #expect(try String(contentsOfFile: target, encoding: .utf8) == "new", "\(name)")
            }
            // Any other failure of renameat2 is reported, not taken for a missing feature.
            try write(dir + "/t.tmp", "x")
            #expect(throws: SystemError.self) {
                try AtomicFile.publish(dir + "/t.tmp", to: dir + "/t", replaceExisting: false, renameNoReplace: unsupported(EACCES), hardLink: real)
            }
            #expect(!FileManager.default.fileExists(atPath: dir + "/t"))
        }
    }
}
