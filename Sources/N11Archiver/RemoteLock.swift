import Foundation
import N11System

/// `--lock-wait` across machines for a remote archive directory: a lock object
/// `DIR/.n11archive.lock.{shared|exclusive}.HOST.PID.RANDOM` (holding host, PID and time) that
/// `create` writes shared while it uploads and `prune` exclusively while it decides and
/// deletes. Object stores have no atomic create-if-absent, so a lock is taken by writing
/// one's own object, listing, and backing off (deleting it) when a conflicting one is
/// there; two takers that meet both back off and retry after a random pause. A lock object
/// older than a day, or of this host whose process is gone, is a holder that died: it is
/// deleted and ignored. So is one dated in the future beyond clock skew: no taker wrote it
/// then, and it would otherwise block every backup until that date. Ages are measured
/// against the time the remote gives our own object, not against this machine's clock.
public final class RemoteLock {
    public static let prefix = ".n11archive.lock."
    static let staleAfter: TimeInterval = 24 * 3600
    /// How far ahead of this machine's clock a lock object's time may be (another machine's
    /// clock, the remote's): beyond it the time is invalid and the lock is dead.
    static let clockSkew: TimeInterval = 300

    private let object: RemotePath
    /// The directory as the lock's own check listed it, once the lock was taken: what a
    /// writer under the lock can pick a free name from without listing again.
    public private(set) var listing: [RemoteObject] = []
    private let rclone: any RemoteTransport
    private var released = false
    /// Deletes the lock object if Ctrl-C or SIGTERM ends the command while it holds it.
    private let interruptCleanup: Interruption.Token

    private init(object: RemotePath, rclone: any RemoteTransport, interruptCleanup: Interruption.Token) {
        self.object = object
        self.rclone = rclone
        self.interruptCleanup = interruptCleanup
    }

    /// `directoryListed`: the caller listed the directory just now, so it exists (its check
    /// is one rclone start less).
    public static func acquire(_ directory: RemotePath, exclusive: Bool, waitSeconds: Double,
                               rclone: any RemoteTransport = Rclone(), directoryListed: Bool = false) throws(ArchiveError) -> RemoteLock {
        let kind = exclusive ? "exclusive" : "shared"
        let object = directory.appending(prefix + kind + "." + hostTag + "." + String(ProcessInfo.processInfo.processIdentifier) + "." + Path.randomSuffix())
        let deadline = Date().addingTimeInterval(waitSeconds)
        let note = Array("\(ProcessInfo.processInfo.hostName) pid \(ProcessInfo.processInfo.processIdentifier) \(kind) \(Date())\n".utf8)
        // The object's content, uploaded from a file of our own: created exclusively and
        // without following a link, as /tmp is shared.
        let local = Path.join(NSTemporaryDirectory(), AtomicFile.tempName(for: "lock"))
        // From before the note or the object exists until it is ours to release or gone.
        let cleanup = Interruption.onInterrupt {
            try? FileSystem.removeFile(local)
            rclone.deleteOnInterrupt(object)
        }
        do {
            let fd = try FileDescriptor.createExclusive(local, mode: 0o600)
            try fd.write(note)
            try fd.close()
        } catch {
            try? FileSystem.removeFile(local)
            Interruption.cancel(cleanup)
            throw ArchiveError.wrap(error)
        }
        defer { try? FileSystem.removeFile(local) }
        do {
            // The directory must exist: an upload would make it (a mistyped --output-dir).
            if !directoryListed { _ = try rclone.list(directory) }
            while true {
                // Our object first, then the listing: its time on the remote is the clock that
                // ages the others, so no machine's clock decides whether a lock is stale.
                try rclone.upload(local, to: object, progress: nil, size: 0)
                let listed = try rclone.list(directory)
                if !conflicting(listed, in: directory, exclusive: exclusive, own: object.name, rclone: rclone) {
                    let lock = RemoteLock(object: object, rclone: rclone, interruptCleanup: cleanup)
                    lock.listing = listed
                    return lock
                }
                try? rclone.delete(object)
                guard Date() < deadline else {
                    throw ArchiveError.remote(location: directory.description, why: "another n11archive is \(exclusive ? "using" : "pruning") this directory (a lock object \(prefix)… is there)",
                                              kind: .busy, hint: "wait for it to finish, or give --lock-wait SECONDS; a lock object older than a day, or dated in the future, is ignored")
                }
                usleep(UInt32.random(in: 500_000...1_500_000))
            }
        } catch {
            // Whatever failed, nothing of ours stays on the remote or in the cleanups.
            try? rclone.delete(object)
            Interruption.cancel(cleanup)
            throw ArchiveError.wrap(error)
        }
    }

    /// This host's name as it goes into lock object names (letters, digits, `-` only).
    static let hostTag: String = {
        let name = ProcessInfo.processInfo.hostName.map { $0.isLetter || $0.isNumber ? $0 : "-" }
        return String(name.prefix(40))
    }()

    /// Whether a lock object is dead: older than a day, dated more than `clockSkew` ahead,
    /// or this host's and its process is gone (a command that was killed, or whose server
    /// vanished before it could delete it).
    static func isStale(_ object: RemoteObject, now: Date) -> Bool {
        let age = now.timeIntervalSince(object.modified)
        if age >= staleAfter || age < -clockSkew { return true }
        let fields = object.name.dropFirst(prefix.count).split(separator: ".")
        guard fields.count >= 4, fields[1] == hostTag, let pid = Int32(fields[2]) else { return false }
        return FileSystem.processIsGone(pid)
    }

    /// Whether a live lock object other than our own (`own`) conflicts with taking one of
    /// this kind. Others are aged against our object's time on the remote (the local clock if
    /// the listing does not show it yet); dead ones of this host are deleted on the way.
    private static func conflicting(_ listed: [RemoteObject], in directory: RemotePath, exclusive: Bool, own: String,
                                    rclone: any RemoteTransport) -> Bool {
        let now = listed.first { $0.name == own }?.modified ?? Date()
        return listed.contains { object in
            guard object.name.hasPrefix(prefix), object.name != own else { return false }
            if isStale(object, now: now) {
                try? rclone.delete(directory.appending(object.name))
                return false
            }
            return exclusive || object.name.hasPrefix(prefix + "exclusive.")
        }
    }

    public func release() {
        guard !released else { return }
        released = true
        try? rclone.delete(object)
        Interruption.cancel(interruptCleanup)
    }

    deinit { release() }
}
