import Foundation
import N11System
import N11Vault

/// Finds the archives an incremental archive depends on (DESIGN.md §8.3): by the archive ID
/// in their header, never by their file name, which anyone may give any file.
public protocol DependencyFinder: AnyObject {
    /// Where it looks, for messages.
    var location: String { get }
    /// Every file whose header claims `archiveID`, in the order to try them (a file anyone
    /// may have copied a header into must not hide the real one); opened as a salvage reads
    /// when `salvaging`. The caller takes the first that is that archive (its own header,
    /// slots and MAC, then every item's digest).
    func candidates(for archiveID: [UInt8], salvaging: Bool) throws -> [ArchiveReader]
}

/// Looks in a store (a directory or a remote directory): every `*.nu11vlt` of the user's,
/// read by its header only (on a remote, the first 64 KiB), fetched whole only when needed.
/// Of two files that claim one ID, the bare dated name is tried first (as prune counts it),
/// then the others.
public final class StoreDependencies: DependencyFinder {
    private let store: any ArchiveStore
    private var byID: [String: [StoredObject]]?
    /// Fetched copies, released when this goes away.
    private var fetched: [FetchedArchive] = []
    private let announce: (String) -> Void

    /// `announce` is told each dependency before it is fetched.
    public init(_ store: any ArchiveStore, announce: @escaping (String) -> Void = { _ in }) {
        self.store = store
        self.announce = announce
    }

    public var location: String { store.location }

    public func candidates(for archiveID: [UInt8], salvaging: Bool) throws -> [ArchiveReader] {
        try (try index()[archiveID.hex] ?? []).compactMap { object in
            announce(store.location(of: object.name))
            let copy = try store.fetch(object, progress: nil)
            fetched.append(copy)
            // A copy cut short before its root is no dependency: another copy may be whole.
            guard let reader = try? ArchiveReader(path: copy.path, name: copy.name, salvaging: salvaging),
                  !reader.manifestRootMissing else { return nil }
            return reader
        }
    }

    /// The store's archives by the ID their header claims.
    private func index() throws -> [String: [StoredObject]] {
        if let byID { return byID }
        var found: [String: [StoredObject]] = [:]
        let objects = try store.list().filter { $0.foreignOwner == nil && $0.name.hasSuffix(ArchiveRetention.nameSuffix) && !$0.name.hasPrefix(".") }
            .sorted { (ArchiveRetention.sequence(of: $0.name), $0.name) < (ArchiveRetention.sequence(of: $1.name), $1.name) }
        for object in objects {
            guard let keys = try store.keyEntries(of: object), keys.header.version == 3 else { continue }
            found[keys.header.archiveIDHex, default: []].append(object)
        }
        byID = found
        return found
    }
}
