import Foundation
import N11Crypto
import N11System

/// An upload that follows a new archive while libzip writes it into the spool: a thread of
/// its own reads back from the page cache what the writer has declared final
/// (`FinalPrefixObserver`, as `TrailingSHA256` does) and feeds it to `rclone rcat` under the
/// upload's temp name. The upload then ends a moment after the archive does, instead of
/// starting once it is complete (issue 29). On the way it hashes the bytes with the hash the
/// remote keeps (SHA-1 or MD5 on sftp; none where the remote keeps SHA-256 or nothing), so
/// that the upload is checked against the remote's hash without reading the file again.
///
/// Only where the backend takes a stream (rclone's PutStream; elsewhere rcat would copy the
/// stream to a file on this machine before sending it) and the check after it costs no more
/// than after a whole upload (`UploadFeatures.streamsWithCheck`: S3 keeps no MD5 of a
/// stream, so it would be read back); elsewhere the spooled file is uploaded as before.
/// Whatever goes wrong here (no such backend, rclone failing, libzip rewriting what it
/// declared final) only makes `finish` say `.notSent`: the caller then uploads the spooled
/// file whole, with rclone's retries. The temp object is never published unchecked.
final class StreamedUpload: FinalPrefixObserver, @unchecked Sendable {
    /// Where it goes: the temp name the checked archive is then moved from.
    let temp: RemotePath
    private let transport: any RemoteTransport
    private let condition = NSCondition()
    /// Guarded by `condition`. A duplicate of the archive's descriptor once the writer
    /// starts (`attach`); how far the file is final and how far it is sent; the size to end
    /// at once the archive is complete; why it cannot be used; whether the caller gave up on it.
    private var file: FileDescriptor?
    private var final: Int64 = 0
    private var sent: Int64 = 0
    private var end: Int64?
    private var problem: String?
    private var abandoned = false
    /// The upload while the thread writes to it (so `abandon` can unblock that write).
    private var writing: (any StreamingUpload)?
    private var outcome: Outcome?
    private var exited = false
    /// Whether `rcat` was started: the temp object may then exist.
    private var uploadStarted = false
    /// Told of the bytes sent from when `finish` is called (what is left once the archive is
    /// complete).
    private var progress: ArchiveProgress?

    enum Outcome: Equatable {
        /// Complete on the remote under `temp`; `hash` is the remote's kind of hash of what
        /// was sent, when it keeps SHA-1 or MD5 (nil: it keeps SHA-256, or none).
        case sent(hash: (type: String, hex: String)?, features: UploadFeatures)
        /// Not usable, and why; with `started`, the temp object may hold part of it.
        case notSent(String, started: Bool)

        static func == (a: Outcome, b: Outcome) -> Bool {
            switch (a, b) {
            case let (.sent(x, f), .sent(y, g)): return x?.type == y?.type && x?.hex == y?.hex && f == g
            case let (.notSent(x, s), .notSent(y, t)): return x == y && s == t
            default: return false
            }
        }
    }

    /// Starts the thread: it asks the backend what it can do (one rclone start, while the
    /// archive is being planned) and starts `rcat`, then waits for bytes.
    init(to temp: RemotePath, transport: any RemoteTransport) {
        self.temp = temp
        self.transport = transport
        let thread = Thread { [self] in run() }
        thread.start()
    }

    /// The archive's file, as the writer opens it: read through a duplicate descriptor, so
    /// that the writer may close its own before `finish` is called.
    func attach(_ descriptor: FileDescriptor) {
        condition.lock()
        defer { condition.unlock() }
        do { file = try descriptor.duplicate() } catch { problem = "\(error)" }
        condition.broadcast()
    }

    func prefixIsFinal(upTo end: Int64) {
        condition.lock()
        final = max(final, end)
        condition.signal()
        condition.unlock()
    }

    func finalPrefixWasRewritten() {
        condition.lock()
        problem = "libzip wrote again into what it had declared final"
        condition.broadcast()
        condition.unlock()
    }

    /// Whether `rcat` was started (its temp object may exist), for Ctrl-C's cleanup.
    var hasStarted: Bool {
        condition.lock()
        defer { condition.unlock() }
        return uploadStarted
    }

    /// Whether it is sending (started, and nothing went wrong so far): what to tell the user
    /// while `finish` waits. Waits until the thread has decided whether to stream (rclone's
    /// account of the backend comes while the archive is written, but a small archive can be
    /// done first).
    var isSending: Bool {
        condition.lock()
        defer { condition.unlock() }
        while !uploadStarted && problem == nil && !exited { condition.wait() }
        return uploadStarted && problem == nil && !abandoned
    }

    /// Once the archive is complete at `size` bytes: sends the rest (telling `progress`), ends
    /// the upload and waits for the remote to have it.
    func finish(size: Int64, progress: ArchiveProgress? = nil) -> Outcome {
        condition.lock()
        defer { condition.unlock() }
        end = size
        if let progress {
            progress.begin(items: 1, bytes: size, alreadyDone: sent)
            self.progress = progress
        }
        condition.broadcast()
        while !exited { condition.wait() }
        if outcome != nil, let progress {
            progress.itemDone()
            progress.finish()
        }
        return outcome ?? .notSent(problem ?? "the upload stopped", started: uploadStarted)
    }

    /// Ends the upload unfinished (the archive failed), at once even if rclone is stalled.
    /// Idempotent. Returns whether it had started: the temp object, which may then exist,
    /// is the caller's to delete.
    @discardableResult
    func abandon() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        abandoned = true
        writing?.interrupt(force: false)
        condition.broadcast()
        // rclone ends on SIGTERM once it has taken back what it sent (an S3 multipart upload
        // is aborted over the same connection): if that is stalled too, it is killed.
        let deadline = Date().addingTimeInterval(2)
        while !exited {
            if !condition.wait(until: deadline) {
                if !exited { writing?.interrupt(force: true) }
                break
            }
        }
        while !exited { condition.wait() }
        return uploadStarted
    }

    private func run() {
        // rclone may end at any time; its pipe must then fail a write, not end the process.
        ChildProcess.blockBrokenPipeSignalOnThisThread()
        var upload: (any StreamingUpload)? = nil
        var hash: (type: String, digest: MessageDigest)? = nil
        var features = UploadFeatures(streams: false, hashes: [], hashesFromContent: false)
        defer {
            condition.lock()
            exited = true
            condition.broadcast()
            condition.unlock()
        }
        func stop(_ why: String) {
            condition.lock()
            if problem == nil { problem = why }
            condition.broadcast()
            condition.unlock()
            upload?.abandon()
        }
        if let told = transport.uploadFeatures(of: temp.parent) { features = told }
        guard features.streamsWithCheck else { return stop("the remote takes no streamed uploads it can check") }
        do {
            hash = try Self.digest(for: features.hashes)
            condition.lock()
            let given = abandoned
            uploadStarted = !given
            condition.broadcast()
            condition.unlock()
            if given { return }
            upload = try transport.startStreamingUpload(to: temp)
        } catch { return stop("\(error)") }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        condition.lock()
        while true {
            // Until there is something to send, or the archive is complete and all of it sent.
            while !abandoned && problem == nil && !(file != nil && sent < final) && !(end != nil && sent == final) {
                condition.wait()
            }
            if abandoned || problem != nil { break }
            if let end, sent == final {
                condition.unlock()
                guard final == end else { stop("the archive ended at \(end) bytes, \(final) of them declared final"); condition.lock(); break }
                do {
                    try upload?.finish()
                    let sentHash = try hash.map { (type: $0.type, hex: try $0.digest.finish().hex) }
                    condition.lock()
                    outcome = .sent(hash: sentHash, features: features)
                } catch {
                    stop("\(error)")
                    condition.lock()
                }
                break
            }
            guard let file, let upload else { break }
            let (from, upTo) = (sent, final)
            writing = upload
            condition.unlock()
            var position = from
            var failure: String? = nil
            while position < upTo {
                let count = Int(min(Int64(buffer.count), upTo - position))
                do {
                    let n = try file.read(into: &buffer, count: count, at: position)
                    guard n > 0 else { failure = "the spooled archive ended early"; break }
                    hash?.digest.update(buffer[0..<n])
                    try upload.write(buffer[0..<n])
                    position += Int64(n)
                } catch {
                    failure = "\(error)"
                    break
                }
                // Counted block by block: one pass can be most of the archive (libzip declares
                // a large entry final only once it has rewritten its local header, so the
                // last pass may begin just before `finish`), and the bar, once `finish` put it
                // up, moves with every block instead of jumping at the end of the pass.
                condition.lock()
                progress?.add(bytes: position - sent)
                sent = position
                condition.unlock()
            }
            condition.lock()
            writing = nil
            if let failure, problem == nil { problem = failure }
        }
        let gaveUp = outcome == nil
        condition.unlock()
        if gaveUp { upload?.abandon() }
    }

    /// The hash to take on the way: none where the remote keeps SHA-256 (the archive's own
    /// digest is compared), else SHA-1 or MD5, the first the remote keeps.
    private static func digest(for kept: [String]) throws -> (type: String, digest: MessageDigest)? {
        if kept.contains("sha256") { return nil }
        if kept.contains("sha1") { return ("sha1", try SHA1Digest()) }
        if kept.contains("md5") { return ("md5", try MD5Digest()) }
        return nil
    }
}
