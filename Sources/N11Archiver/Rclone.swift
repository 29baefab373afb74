import Foundation
import N11Crypto
import N11System

/// A place on an rclone remote, `REMOTE:PATH`, as rclone names it. A command-line argument
/// is one when the part before its first `:` is a remote name (letters, digits, `_ - . `
/// and spaces, no `/`); anything else is a local path (write `./a:b` for a local file named
/// `a:b`, as rclone and restic ask).
public struct RemotePath: Sendable, Equatable, CustomStringConvertible {
    public let remote: String
    public let path: String

    public init(remote: String, path: String) {
        self.remote = remote
        self.path = path
    }

    public static func parse(_ text: String) -> RemotePath? {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let name = text[..<colon]
        guard !name.isEmpty, !name.hasPrefix("-"), !name.hasPrefix(" "),
              name.allSatisfy({ $0.isLetter || $0.isNumber || "_-. ".contains($0) }) else { return nil }
        return RemotePath(remote: String(name), path: String(text[text.index(after: colon)...]))
    }

    public var description: String { remote + ":" + path }

    /// The last component (a file's name).
    public var name: String { String(path.split(separator: "/").last ?? "") }

    /// The directory it is in: `nas:` for `nas:a`, `sftp:/` for `sftp:/a` (the root, not the
    /// login directory), `nas:dir` for `nas:dir/a`.
    public var parent: RemotePath {
        guard let slash = path.lastIndex(of: "/") else { return RemotePath(remote: remote, path: "") }
        if slash == path.startIndex { return RemotePath(remote: remote, path: "/") }
        return RemotePath(remote: remote, path: String(path[..<slash]))
    }

    public func appending(_ name: String) -> RemotePath {
        RemotePath(remote: remote, path: path.isEmpty || path.hasSuffix("/") ? path + name : path + "/" + name)
    }
}

/// One file in a remote directory, as `rclone lsjson` lists it.
public struct RemoteObject: Sendable, Equatable {
    public let name: String
    public let size: Int64
    public let modified: Date
}

/// What remote stores, locks and publishing do with objects on a remote: list, copy up and
/// down, move, delete, hash, read a prefix. `Rclone` is the one that reaches a real remote;
/// the tests give `RcloneStore`, `RemoteLock` and `RemoteArchives` an in-memory one to cut an
/// upload, corrupt it on the way or hold a lock, which a real server cannot be made to do
/// on cue.
public protocol RemoteTransport: Sendable {
    func list(_ directory: RemotePath) throws(ArchiveError) -> [RemoteObject]
    func upload(_ local: String, to remote: RemotePath, progress: ArchiveProgress?, size: Int64) throws(ArchiveError)
    func download(_ remote: RemotePath, to local: String, progress: ArchiveProgress?, size: Int64) throws(ArchiveError)
    func move(_ from: RemotePath, to: RemotePath) throws(ArchiveError)
    func delete(_ remote: RemotePath) throws(ArchiveError)
    /// One quick try, for Ctrl-C: never waits long, never throws.
    func deleteOnInterrupt(_ remote: RemotePath)
    /// The remote's own hashes of an object by type (`sha256`, `sha1`, `md5`, …), in one
    /// call: only of `types` when given (each may cost the remote a pass over the object);
    /// empty if it keeps none.
    func remoteHashes(_ remote: RemotePath, types: [String]?) throws(ArchiveError) -> [String: String]
    /// The same kind of hash of a local file, computed the way the remote side does.
    func localHash(_ path: String, type: String) throws(ArchiveError) -> String
    /// SHA-256 of an object, read back whole (for remotes without hashes).
    func sha256ByReading(_ remote: RemotePath) throws(ArchiveError) -> String
    /// The first `count` bytes of an object.
    func prefix(_ remote: RemotePath, count: Int) throws(ArchiveError) -> [UInt8]
    /// What the backend of `directory` can do for an upload; nil when it cannot be told.
    func uploadFeatures(of directory: RemotePath) -> UploadFeatures?
    /// Starts an upload to `remote` of bytes given as they come (`rclone rcat`).
    func startStreamingUpload(to remote: RemotePath) throws(ArchiveError) -> any StreamingUpload
    /// Starts a download of bytes `offset..<offset + count` of `remote` (`count` nil: to its
    /// end), read as they come (`rclone cat`).
    func startStreamingDownload(of remote: RemotePath, offset: Int64, count: Int64?) throws(ArchiveError) -> any StreamingDownload
}

/// A download read as its bytes come. One thread reads and finishes it; `abandon` may come
/// from another.
public protocol StreamingDownload: AnyObject, Sendable {
    /// Writes up to `count` of the next bytes into `file` at `offset`; 0 at the end.
    func receive(into file: FileDescriptor, at offset: Int64, count: Int) throws(ArchiveError) -> Int
    /// Whether the download has ended (it gave everything): reads one byte ahead, so only
    /// once `receive` had all that was expected.
    func isAtEnd() throws(ArchiveError) -> Bool
    /// Waits for the download to end, and throws if it failed.
    func finish() throws(ArchiveError)
    /// Ends the download where it is (the reader then sees its end or an error).
    func abandon()
}

/// What a backend can do for an upload, as rclone tells it.
public struct UploadFeatures: Sendable, Equatable {
    /// It takes an upload of unknown length as it comes (rclone's PutStream). Without it,
    /// `rcat` would copy the stream to a file on this machine before sending: an archive is
    /// then better uploaded from the spool.
    public let streams: Bool
    /// The hashes it keeps of an object (`sha256`, `sha1`, `md5`, …).
    public let hashes: [String]
    /// Its hashes are computed from the stored bytes when asked for (sftp runs `sha1sum` on
    /// the server; a local directory hashes the file). Elsewhere a hash is what the uploader
    /// declared, and rclone declares none for a stream of unknown length (S3 keeps no MD5
    /// for a multipart upload, B2 no SHA-1 for a large file): a streamed upload would then
    /// have to be read back whole.
    public let hashesFromContent: Bool

    public init(streams: Bool, hashes: [String], hashesFromContent: Bool) {
        self.streams = streams
        self.hashes = hashes
        self.hashesFromContent = hashesFromContent
    }

    /// Whether an archive is best uploaded as it is written: the backend takes a stream,
    /// and the check after it costs no more than after an upload of the whole file (the
    /// remote hashes what it stores, or keeps no hash, so the upload is read back either way).
    public var streamsWithCheck: Bool {
        streams && (hashesFromContent || !hashes.contains { ["sha256", "sha1", "md5"].contains($0) })
    }
}

/// An upload fed as its bytes come. One thread writes and finishes it; `interrupt` may come
/// from another. Nothing is retried: the bytes are not kept (the caller falls back to an
/// upload of the whole file).
public protocol StreamingUpload: AnyObject, Sendable {
    /// Sends the next bytes; blocks while the remote is slower than the writer.
    func write(_ bytes: ArraySlice<UInt8>) throws(ArchiveError)
    /// Ends the input and waits for the upload to be complete on the remote.
    func finish() throws(ArchiveError)
    /// Ends the upload unfinished, and waits for that (what reached the remote stays under
    /// its temp name, for the caller to delete).
    func abandon()
    /// From another thread: makes a blocked `write` return with an error (`force`: even if
    /// the uploader is busy taking back what it sent over a stalled connection).
    func interrupt(force: Bool)
}

/// Remote storage through the `rclone` program, configured by the user's own rclone.conf
/// (`RCLONE_CONFIG` and rclone's other variables are passed through). n11archive hands
/// rclone no secret: archives are encrypted before they leave, and the remote's
/// credentials are rclone's business. Each call is one rclone process with bounded
/// retries (`--retries`, `--low-level-retries`, rclone's own back-off) and timeouts, so a
/// dead server fails a command instead of hanging it.
public struct Rclone: RemoteTransport {
    /// The program: `$N11_RCLONE`, else `rclone` on PATH.
    public let program: String

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        program = environment["N11_RCLONE"].flatMap { $0.isEmpty ? nil : $0 } ?? "rclone"
    }

    static let commonFlags = ["--retries", "3", "--retries-sleep", "2s", "--low-level-retries", "2",
                              "--contimeout", "10s", "--timeout", "30s", "--log-level", "ERROR", "--use-json-log=false"]

    /// Runs `rclone ARGS`; returns its standard output, or throws a classified error about `subject`.
    @discardableResult
    func run(_ arguments: [String], about subject: RemotePath, outputLimit: Int = 16 << 20,
             flags: [String] = commonFlags) throws(ArchiveError) -> [UInt8] {
        let outcome: ChildProcess.Outcome
        let output: [UInt8]
        do { (outcome, output) = try ChildProcess.run([program] + arguments + flags, outputLimit: outputLimit) }
        catch let error as SystemError where error.errno == ENOENT { throw Self.missingProgram(program) }
        catch { throw ArchiveError.wrap(error) }
        guard outcome.status == 0 else { throw Self.classify(outcome, subject: subject) }
        return output
    }

    static func missingProgram(_ program: String) -> ArchiveError {
        .remote(location: program, why: "rclone is not installed (no '\(program)' on PATH)", kind: .configuration,
                hint: "install it (Debian: apt-get install rclone; Scripts/setup does), or name it with N11_RCLONE")
    }

    /// Turns rclone's exit status and last error lines into a kind and message.
    static func classify(_ outcome: ChildProcess.Outcome, subject: RemotePath) -> ArchiveError {
        let text = outcome.errorText
        let lower = text.lowercased()
        // The last line that is not a progress report; with --use-json-log its "msg" field.
        let lines = text.split(separator: "\n").map(String.init).filter { !$0.contains("\"stats\":") }
        var lastLine = lines.last ?? "exit status \(outcome.status)"
        if lastLine.hasPrefix("{"), let data = lastLine.data(using: .utf8),
           let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let message = object["msg"] as? String {
            lastLine = message
        }
        // rclone prints "2026/11/22 21:00:00 ERROR : …": keep what follows the level.
        let detail = lastLine.range(of: "ERROR : ").map { String(lastLine[$0.upperBound...]) }
            ?? lastLine.range(of: "CRITICAL: ").map { String(lastLine[$0.upperBound...]) } ?? lastLine
        let place = subject.description
        func error(_ kind: FailureKind, _ why: String, _ hint: String?) -> ArchiveError {
            .remote(location: place, why: why, kind: kind, hint: hint)
        }
        if lower.contains("didn't find section in config file") || lower.contains("config file not found") {
            return error(.configuration, "rclone has no remote named '\(subject.remote)'",
                         "set it up with `rclone config` (or point RCLONE_CONFIG at your rclone.conf); `rclone listremotes` shows the names")
        }
        // Words, not bare status numbers: rclone's log lines start with a time whose
        // milliseconds can read "403".
        if lower.contains("401 unauthorized") || lower.contains("403 forbidden") || lower.contains("unauthorized") || lower.contains("forbidden")
            || lower.contains("unable to authenticate") || lower.contains("permission denied") || lower.contains("authentication failed") {
            return error(.authentication, "the remote refused rclone's credentials: \(detail)",
                         "check the remote's credentials in rclone's configuration (`rclone config`)")
        }
        if lower.contains("no space left") || lower.contains("insufficient storage")
            || lower.contains("quota") || lower.contains("disk full") {
            return error(.ioFailure, "the remote is full: \(detail)", "free space on the remote (`n11archive prune`), then run again")
        }
        if outcome.status == 3 || lower.contains("directory not found") {
            return error(.missingInput, "no such directory on the remote", "check the path; create the directory with `rclone mkdir \(place)`")
        }
        if outcome.status == 4 || lower.contains("object not found") || lower.contains("file not found")
            || lower.contains("source doesn't exist") {
            return error(.missingInput, "no such file on the remote", "check the name with `n11archive archives \(subject.parent)`")
        }
        if lower.contains("connection refused") || lower.contains("no such host") || lower.contains("timeout")
            || lower.contains("connection reset") || lower.contains("broken pipe") || lower.contains("eof") || lower.contains("unreachable") {
            return error(.ioFailure, "cannot reach the remote: \(detail)", "check the network and that the server is up; the command can be run again")
        }
        return error(.ioFailure, "rclone failed (exit status \(outcome.status)): \(detail)", nil)
    }

    // MARK: operations

    /// The files directly in `directory` (not below it).
    public func list(_ directory: RemotePath) throws(ArchiveError) -> [RemoteObject] {
        let output = try run(["lsjson", "--files-only", "--no-mimetype", directory.description], about: directory)
        guard let items = try? JSONSerialization.jsonObject(with: Data(output)) as? [[String: Any]] else {
            throw .remote(location: directory.description, why: "rclone lsjson printed something that is not a listing", kind: .other, hint: nil)
        }
        let parser = ISO8601DateFormatter()
        return items.compactMap { item in
            guard let name = item["Name"] as? String, let size = item["Size"] as? Int64 ?? (item["Size"] as? Int).map(Int64.init) else { return nil }
            // rclone gives up to nanoseconds ("…:08.123456789Z"), which ISO8601DateFormatter
            // does not read: the fraction is dropped (lock ages are counted in hours).
            let text = (item["ModTime"] as? String ?? "").replacingOccurrences(of: #"\.[0-9]+"#, with: "", options: .regularExpression)
            // An unreadable time counts as now: a lock object must never look stale by accident.
            return RemoteObject(name: name, size: size, modified: parser.date(from: text) ?? Date())
        }
    }

    public func upload(_ local: String, to remote: RemotePath, progress: ArchiveProgress?, size: Int64) throws(ArchiveError) {
        try transfer(["copyto", local, remote.description], about: remote, progress: progress, size: size)
    }

    public func download(_ remote: RemotePath, to local: String, progress: ArchiveProgress?, size: Int64) throws(ArchiveError) {
        try transfer(["copyto", remote.description, local], about: remote, progress: progress, size: size)
    }

    /// A copy whose progress is followed: rclone reports its transferred bytes every half
    /// second (`--stats`, as JSON log lines on stderr), which feed `progress`.
    private func transfer(_ arguments: [String], about subject: RemotePath, progress: ArchiveProgress?, size: Int64) throws(ArchiveError) {
        guard let progress else { try run(arguments, about: subject); return }
        let flags = Self.commonFlags.filter { $0 != "--use-json-log=false" && $0 != "ERROR" && $0 != "--log-level" }
            + ["--log-level", "NOTICE", "--use-json-log", "--stats", "500ms", "--stats-log-level", "NOTICE"]
        let child: ChildProcess
        do { child = try ChildProcess.start([program] + arguments + flags) }
        catch let error as SystemError where error.errno == ENOENT { throw Self.missingProgram(program) }
        catch { throw ArchiveError.wrap(error) }
        progress.begin(items: 1, bytes: size)
        let done = DispatchSemaphore(value: 0), stopped = DispatchSemaphore(value: 0)
        let watcher = Thread {
            var reported: Int64 = 0
            func update() {
                // rclone counts a retried transfer's bytes again: never past the whole file.
                if var bytes = Self.transferredBytes(in: child.errorTail()) {
                    if size > 0 { bytes = min(bytes, size) }
                    guard bytes > reported else { return }
                    progress.add(bytes: bytes - reported)
                    reported = bytes
                }
            }
            while done.wait(timeout: .now() + 0.25) == .timedOut { update() }
            update()   // rclone's last report, written as it ended
            stopped.signal()
        }
        watcher.start()
        let outcome = child.wait()
        done.signal()
        stopped.wait()
        guard outcome.status == 0 else { throw Self.classify(outcome, subject: subject) }
        progress.itemDone()
        progress.finish()
    }

    /// The `"bytes":N` of the last stats line in rclone's JSON log.
    static func transferredBytes(in log: String) -> Int64? {
        guard let range = log.range(of: "\"bytes\":", options: .backwards) else { return nil }
        let digits = log[range.upperBound...].prefix { $0.isNumber }
        return Int64(digits)
    }

    public func move(_ from: RemotePath, to: RemotePath) throws(ArchiveError) {
        try run(["moveto", from.description, to.description], about: to)
    }

    public func delete(_ remote: RemotePath) throws(ArchiveError) {
        try run(["deletefile", remote.description], about: remote)
    }

    /// What an interrupted command takes back on its way out (a temp or lock object): short
    /// time-outs, so that Ctrl-C never waits long on an unreachable remote (what is left
    /// there, the next prune or a stale-lock check removes). An upload whose rclone was just
    /// stopped may still be finishing on the server (most likely what happened in one CI run
    /// of `RemoteHostileTests`, where a temp object on the loopback WebDAV server outlived a
    /// lone delete), so the object is looked for again after each delete and deleted again,
    /// `deleteAttempts` times at most, a quarter second apart.
    public func deleteOnInterrupt(_ remote: RemotePath) {
        for attempt in 0..<Self.deleteAttempts {
            if attempt > 0 { usleep(250_000) }
            _ = try? run(["deletefile", remote.description], about: remote, flags: Self.quickFlags)
            // Gone, or the remote does not answer: nothing more to do here.
            guard let listed = try? run(["lsjson", "--files-only", "--no-mimetype", remote.description], about: remote,
                                        flags: Self.quickFlags),
                  listed.contains(UInt8(ascii: "{")) else { return }
        }
    }

    static let deleteAttempts = 4

    static let quickFlags = ["--retries", "1", "--low-level-retries", "1", "--contimeout", "5s", "--timeout", "5s",
                             "--log-level", "ERROR", "--use-json-log=false"]

    /// The remote's own hash of a file (`sha256`, `sha1`, `md5`), or nil if the backend has none.
    public func remoteHashes(_ remote: RemotePath, types: [String]?) throws(ArchiveError) -> [String: String] {
        // One process for every hash asked for (each rclone start costs ~0.1 s).
        let asked = types.map { $0.flatMap { ["--hash-type", $0] } } ?? ["--hash"]
        let output = try run(["lsjson"] + asked + ["--files-only", "--no-mimetype", remote.description], about: remote)
        guard let items = try? JSONSerialization.jsonObject(with: Data(output)) as? [[String: Any]] else {
            throw .remote(location: remote.description, why: "rclone lsjson printed something that is not a listing", kind: .other, hint: nil)
        }
        let hashes = (items.first?["Hashes"] as? [String: String]) ?? [:]
        return hashes.filter { !$0.value.isEmpty }.mapValues { $0.lowercased() }
    }

    /// The same kind of hash of a local file, by rclone itself (so both sides agree on it).
    public func localHash(_ path: String, type: String) throws(ArchiveError) -> String {
        let output = try run(["hashsum", type, path], about: RemotePath(remote: "local", path: path))
        return String(decoding: output, as: UTF8.self).split(separator: " ").first.map { $0.lowercased() } ?? ""
    }

    /// SHA-256 of a remote file, read back through `rclone cat` (for backends without hashes).
    public func sha256ByReading(_ remote: RemotePath) throws(ArchiveError) -> String {
        do {
            let child = try ChildProcess.start([program, "cat", remote.description] + Self.commonFlags)
            let digest = try SHA256Digest()
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let n = try child.output.read(into: &buffer, count: buffer.count)
                if n == 0 { break }
                digest.update(buffer[0..<n])
            }
            let outcome = child.wait()
            guard outcome.status == 0 else { throw Self.classify(outcome, subject: remote) }
            return try digest.finish().hex
        } catch let error as ArchiveError { throw error }
        catch let error as SystemError where error.errno == ENOENT { throw Self.missingProgram(program) }
        catch { throw ArchiveError.wrap(error) }
    }

    /// rclone's own account of the backend (`backend features`).
    public func uploadFeatures(of directory: RemotePath) -> UploadFeatures? {
        guard let output = try? run(["backend", "features", directory.description], about: directory),
              let document = try? JSONSerialization.jsonObject(with: Data(output)) as? [String: Any],
              let features = document["Features"] as? [String: Any] else { return nil }
        // rclone names the backend only in its description: "sftp://user@host/", "Local file
        // system at /path".
        let description = document["String"] as? String ?? ""
        return UploadFeatures(streams: features["PutStream"] as? Bool ?? false,
                              hashes: (document["Hashes"] as? [String] ?? []).map { $0.lowercased() },
                              hashesFromContent: description.hasPrefix("sftp://") || description.hasPrefix("Local file system"))
    }

    public func startStreamingUpload(to remote: RemotePath) throws(ArchiveError) -> any StreamingUpload {
        do { return RcloneStreamingUpload(try ChildProcess.start([program, "rcat", remote.description] + Self.commonFlags, standardInput: true),
                                          remote: remote) }
        catch let error as SystemError where error.errno == ENOENT { throw Self.missingProgram(program) }
        catch { throw ArchiveError.wrap(error) }
    }

    public func startStreamingDownload(of remote: RemotePath, offset: Int64, count: Int64?) throws(ArchiveError) -> any StreamingDownload {
        let range = (offset > 0 ? ["--offset", String(offset)] : []) + (count.map { ["--count", String($0)] } ?? [])
        do { return RcloneStreamingDownload(try ChildProcess.start([program, "cat"] + range + [remote.description] + Self.commonFlags),
                                            remote: remote) }
        catch let error as SystemError where error.errno == ENOENT { throw Self.missingProgram(program) }
        catch { throw ArchiveError.wrap(error) }
    }

    /// The first `count` bytes of a remote file (enough for an archive's header entries).
    public func prefix(_ remote: RemotePath, count: Int) throws(ArchiveError) -> [UInt8] {
        try run(["cat", "--count", String(count), remote.description], about: remote, outputLimit: count)
    }
}

/// A running rclone that another thread may ask to end. Reaping and signalling take one lock:
/// a signal must never reach a PID that was reaped (it may be another process's by then).
final class GuardedChild: @unchecked Sendable {
    let child: ChildProcess
    private let reaping = NSLock()
    private var reaped = false

    init(_ child: ChildProcess) { self.child = child }

    /// Waits for it to end and reaps it.
    func reap() -> ChildProcess.Outcome {
        reaping.lock()
        defer { reaping.unlock() }
        reaped = true
        return child.wait()
    }

    /// Asks it to end (SIGTERM; with `force`, SIGKILL) unless it was reaped.
    func askToEnd(force: Bool) {
        reaping.lock()
        defer { reaping.unlock() }
        if !reaped { child.askToEnd(force: force) }
    }

    /// Ends it at once and reaps it.
    func terminate() {
        reaping.lock()
        defer { reaping.unlock() }
        reaped = true
        child.terminate()
    }
}

/// `rclone cat REMOTE:PATH`, read from its standard output.
final class RcloneStreamingDownload: StreamingDownload, @unchecked Sendable {
    private let process: GuardedChild
    private let remote: RemotePath

    init(_ child: ChildProcess, remote: RemotePath) {
        process = GuardedChild(child)
        self.remote = remote
        // rclone writes ahead by a MiB, not 64 KiB, before it waits for us.
        child.output.setPipeCapacity(1 << 20)
    }

    /// Spliced from rclone's output: the bytes do not pass through this process (on loopback,
    /// where the cores are busy with rclone on both ends, that copy cost 5–10% of a restore).
    func receive(into file: FileDescriptor, at offset: Int64, count: Int) throws(ArchiveError) -> Int {
        do { return try file.splice(from: process.child.output, at: offset, count: count) } catch { throw ArchiveError.wrap(error) }
    }

    func isAtEnd() throws(ArchiveError) -> Bool {
        var probe = [UInt8](repeating: 0, count: 1)
        do { return try process.child.output.read(into: &probe, count: 1) == 0 } catch { throw ArchiveError.wrap(error) }
    }

    func finish() throws(ArchiveError) {
        let outcome = process.reap()
        guard outcome.status == 0 else { throw Rclone.classify(outcome, subject: remote) }
    }

    func abandon() { process.askToEnd(force: true) }
}

/// `rclone rcat REMOTE:PATH`, fed through its standard input.
final class RcloneStreamingUpload: StreamingUpload, @unchecked Sendable {
    private let process: GuardedChild
    private let remote: RemotePath

    init(_ child: ChildProcess, remote: RemotePath) {
        process = GuardedChild(child)
        self.remote = remote
    }

    func write(_ bytes: ArraySlice<UInt8>) throws(ArchiveError) {
        guard let input = process.child.input else { preconditionFailure("rcat is started with an input") }
        do { try input.write(bytes) }
        catch {
            // rclone ended (EPIPE): what it said is the reason.
            let outcome = process.reap()
            throw outcome.status == 0 ? ArchiveError.wrap(error) : Rclone.classify(outcome, subject: remote)
        }
    }

    func finish() throws(ArchiveError) {
        process.child.closeInput()
        let outcome = process.reap()
        guard outcome.status == 0 else { throw Rclone.classify(outcome, subject: remote) }
    }

    func abandon() { process.terminate() }

    func interrupt(force: Bool) { process.askToEnd(force: force) }
}
