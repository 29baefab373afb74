import N11Crypto
import N11Format
import N11System

/// Observes a long vault change (a key rotation) for a progress bar: the totals first, then
/// bytes as they are read and each finished item. `ArchiveProgress` is one.
public protocol VaultChangeProgress: AnyObject {
    func begin(items: Int, bytes: Int64)
    func add(bytes: Int64)
    func itemDone()
    func finish()
}

extension Vault {
    /// What a key rotation did.
    public struct KeyRotation: Sendable {
        public var compartments: [Compartment] = []
        /// Items sealed anew, per compartment.
        public var items: [Compartment: Int] = [:]
        public var bytes: Int64 = 0
        /// The new current keys' IDs.
        public var newKeyIDs: [Compartment: [UInt8]] = [:]
        /// Retired keys forgotten afterwards (`forgetRetired`).
        public var forgotten = 0
        public init() {}
    }

    /// Re-encrypts every item of `compartments` (expired fade items too) under new keys, in
    /// one commit, then retires the old keys (`KeyStore.promote`), and forgets the
    /// retired ones if asked. The order makes a kill at any moment leave the old state or the
    /// new one:
    ///
    /// 1. the new keys are saved in the key store as pending: nothing visible uses them;
    /// 2. every item is sealed anew under them out of sight (`VaultStaging`), each checked
    ///    against its tag and digest on the way, the marker too if the vault key changes;
    /// 3. the change commits: its first pending step makes the pending keys current (the old ones
    ///    retired), then the new files replace the old. A kill after the commit is finished
    ///    by the next writer, before it writes anything.
    ///
    /// Damaged records stop it before anything is written (they would be left under a key
    /// that may later be forgotten), and so does too little free space: every item exists
    /// twice until the commit.
    public func rotateKeys(of compartments: Set<Compartment>, forgetRetired: Bool = false,
                           progress: VaultChangeProgress? = nil) throws(VaultError) -> KeyRotation {
        var (staging, report) = try stageKeyRotation(of: compartments, progress: progress)
        try staging.commit()
        progress?.finish()
        if forgetRetired { report.forgotten = try keyStore.forgetRetiredKeys(of: compartments) }
        return report
    }

    /// Steps 1 and 2 of `rotateKeys`: everything up to the commit (tests stop here, as a
    /// kill would).
    func stageKeyRotation(of compartments: Set<Compartment>,
                          progress: VaultChangeProgress?) throws(VaultError) -> (VaultStaging, KeyRotation) {
        precondition(isWritable, "vault opened read-only")
        precondition(!compartments.isEmpty)
        let damaged = try damagedItemIDs()
        guard damaged.isEmpty else { throw .rotationBlockedByDamage(ids: damaged) }
        let items = try self.items(includeExpired: true).filter { compartments.contains($0.compartment) }
        let bytes = items.reduce(Int64(0)) { $0 + $1.size + Int64(SealedVaultItem.overhead) }
        do {
            // The new files, their records (a few hundred bytes each) and a margin.
            let needed = bytes + Int64(items.count) * 4096 + (16 << 20)
            let available = try Directory.availableBytes(on: path)
            guard available >= needed else { throw VaultError.notEnoughSpace(path: path, needed: needed, available: available) }
        } catch { throw VaultError.wrap(error) }

        var report = KeyRotation()
        report.compartments = Compartment.allCases.filter(compartments.contains)
        let newKeys = try keyStore.beginRotation(of: compartments)
        progress?.begin(items: items.count, bytes: bytes)
        let staging = try VaultStaging(vault: self)
        do {
            for item in items {
                let sealed = try sealedItem(item)
                try staging.stage(sealed, resealedUnder: newKeys[item.compartment]!, progress: progress)
                report.items[item.compartment, default: 0] += 1
                report.bytes += item.size
                progress?.itemDone()
            }
            if let vaultKey = newKeys[.vault] { try staging.stageMarker(try marker(resealedUnder: vaultKey)) }
            for (compartment, key) in newKeys { report.newKeyIDs[compartment] = try CompartmentKeyRing.id(of: key) }
        } catch {
            staging.discard()
            throw VaultError.wrap(error)
        }
        do throws(VaultError) { try staging.stagePromotion(report.newKeyIDs) } catch {
            staging.discard()
            throw error
        }
        return (staging, report)
    }
}
