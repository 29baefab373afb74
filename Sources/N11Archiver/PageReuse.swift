import N11Crypto
import N11Format
import N11Vault

/// What says whether a manifest page an earlier archive holds is the page a night would
/// write now (DESIGN.md §8.3): SHA-256 over every field of the page's records (FORMAT.md
/// §10.4), each with the ID of the archive that holds its bytes instead of a holder number
/// (holders are numbered per archive). Two pages with the same fingerprint list the same
/// items with the same names, times, sizes, digests and places, whichever archive wrote
/// them. Made from the catalogue's records as they are, so that a night that decides on
/// 3,000,000 items decodes nothing for it.
final class PageFingerprint {
    private static let context = Array("n11archive/v3/page-fingerprint".utf8)
    private let digest: SHA256Digest
    /// Records gathered and hashed 64 KiB at a time.
    private var pending = BinaryWriter(capacity: 68 << 10)

    init() throws {
        digest = try SHA256Digest()
        digest.update(Self.context[...])
    }

    /// `item`, listed with its bytes at `offset` in pack `pack` of archive `archive` (hex ID).
    func add(_ item: ItemMetadata, pack: UInt32, offset: Int64, heldBy archive: String) {
        // (Field by field: an array of the six strings was an allocation an item.)
        text(item.id); text(item.sha256); text(item.name); text(archive); text(item.kind.rawValue); text(item.compartment.rawValue)
        pending.byte(item.expires == nil ? 0 : 1)
        pending.integer(item.size)
        pending.signedInteger(Timestamp.milliseconds(item.created))
        if let expires = item.expires { pending.signedInteger(Timestamp.milliseconds(expires)) }
        pending.integer(UInt64(pack))
        pending.integer(offset)
        if pending.bytes.count >= 64 << 10 { flush() }
    }

    private func text(_ value: String) {
        pending.integer(UInt64(value.utf8.count))
        pending.append(utf8: value)
    }

    private func flush() {
        digest.update(pending.bytes[...])
        pending.removeAll()
    }

    /// The fingerprint, as the shipment record keeps it (hex).
    func finish() throws -> String {
        flush()
        return try digest.finish().hex
    }
}

/// Where pages end: after an item whose ID says so (`PackedLayout.endsPage`), or at the cap.
/// The layout's pass and an incremental night's decision cut the same pages with it.
struct PageCut {
    let average: UInt64
    let cap: Int
    private(set) var count = 0
    /// One digest for every ID (a context made per ID was most of the cut's cost).
    private let digest: SHA256Digest

    init(average: UInt64, cap: Int) throws {
        self.average = average
        self.cap = cap
        digest = try SHA256Digest()
    }

    /// Counts `id` into the current page; true when the page ends after it.
    mutating func ends(after id: [UInt8]) throws -> Bool {
        count += 1
        digest.update(PackedLayout.pageContext[...])
        digest.update(id[...])
        guard PackedLayout.endsPage(digest: try digest.finish(), average: average) || count == cap else { return false }
        count = 0
        return true
    }
}

/// The pages of the last manifest a night may point at instead of writing them again, by
/// first item ID, with the holder number each has in the night's `dependsOn`.
struct ReusablePages: Sendable {
    struct Page: Sendable, Equatable {
        let holder: Int
        let recorded: ShipmentRecord.Page
    }
    let byFirstID: [String: Page]

    static let none = ReusablePages(byFirstID: [:])
}
