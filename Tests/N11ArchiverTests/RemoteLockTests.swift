import Foundation
import Testing
@testable import N11Archiver

/// Which remote lock objects are dead (issue 25 finding 8: a lock object dated in the future
/// blocked create and prune until that date).
@Suite("Remote lock objects: which are stale")
struct RemoteLockTests {
    func lock(_ name: String = "shared.other-host.4242.abcdef", modified: Date) -> RemoteObject {
        RemoteObject(name: RemoteLock.prefix + name, size: 40, modified: modified)
    }

    @Test("a lock of another host is live from a moment ago until a day old, and within clock skew ahead")
    func ages() {
        let now = Date()
        #expect(!RemoteLock.isStale(lock(modified: now), now: now))
        #expect(!RemoteLock.isStale(lock(modified: now.addingTimeInterval(-23 * 3600)), now: now))
        #expect(RemoteLock.isStale(lock(modified: now.addingTimeInterval(-24 * 3600)), now: now))
        #expect(!RemoteLock.isStale(lock(modified: now.addingTimeInterval(RemoteLock.clockSkew - 1)), now: now),
                "another machine's clock a little ahead")
    }

    @Test("a lock dated in the future beyond clock skew is dead: nobody wrote it then")
    func future() {
        let now = Date()
        #expect(RemoteLock.isStale(lock(modified: now.addingTimeInterval(RemoteLock.clockSkew + 1)), now: now))
        #expect(RemoteLock.isStale(lock(modified: now.addingTimeInterval(365 * 86400)), now: now))
    }
}
