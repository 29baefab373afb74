import N11Crypto
import N11Format
import N11Vault

/// What says whether a manifest page an earlier archive holds is the page a night would
/// write now (DESIGN.md §8.3): SHA-256 over the page's records in the form
/// `ManifestRecord.comparable(heldBy:)` gives them, each with the ID of the archive that
/// holds its bytes. Two pages with the same fingerprint list the same items with the same
/// names, times, sizes, digests and places, whichever archive wrote them.
final class PageFingerprint {
    private static let context = Array("n11archive/v3/page-fingerprint".utf8)
    private let digest: SHA256Digest

    init() throws {
        digest = try SHA256Digest()
        digest.update(Self.context[...])
    }

    func add(_ record: ManifestRecord, heldBy archiveID: [UInt8]) {
        digest.update(record.comparable(heldBy: archiveID)[...])
    }

    /// The fingerprint, as the shipment record keeps it (hex).
    func finish() throws -> String { try digest.finish().hex }
}

/// Where pages end: after an item whose ID says so (`PackedLayout.endsPage`), or at the cap.
/// The layout's pass and an incremental night's decision cut the same pages with it.
struct PageCut {
    let average: UInt64
    let cap: Int
    private(set) var count = 0

    init(average: UInt64, cap: Int) {
        self.average = average
        self.cap = cap
    }

    /// Counts `id` into the current page; true when the page ends after it.
    mutating func ends(after id: [UInt8]) throws -> Bool {
        count += 1
        guard try PackedLayout.endsPage(after: id, average: average) || count == cap else { return false }
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
