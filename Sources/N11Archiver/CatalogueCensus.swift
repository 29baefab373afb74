import Foundation
import N11Format
import N11Vault

/// What a walk of the catalogue saw of the items an archive of some compartments lists, skips
/// and leaves out. Counted by whichever pass walks every item first (the layout of a `create`,
/// or the decision of an incremental night), so that no pass walks the catalogue only to
/// count: at 3,000,000 notes a walk opens 3,000,000 sealed records (issue 34).
struct CatalogueCensus {
    let compartments: Set<Compartment>
    let now: Date
    /// Live items of the compartments, and their plaintext bytes.
    private(set) var itemCount = 0
    private(set) var plaintextBytes: Int64 = 0
    /// Expired items of the compartments (never archived).
    private(set) var skippedExpired: [String] = []
    /// Live items of the other compartments, per compartment.
    private(set) var leftOut: [Compartment: Int] = [:]
    /// A record did not open: the walk saw not every item, and its counts are not to be used.
    private(set) var sawDamage = false

    init(compartments: Set<Compartment>, now: Date) {
        self.compartments = compartments
        self.now = now
    }

    /// Counts `item`; true if the archive lists it.
    mutating func lists(_ item: ItemMetadata) -> Bool {
        let expired = item.isExpired(at: now)
        guard compartments.contains(item.compartment) else {
            if !expired { leftOut[item.compartment, default: 0] += 1 }
            return false
        }
        if expired {
            skippedExpired.append(item.id)
            return false
        }
        itemCount += 1
        plaintextBytes += item.size
        return true
    }

    mutating func noteDamage(_ damagedIDs: [String]) {
        if !damagedIDs.isEmpty { sawDamage = true }
    }
}
