import N11Format
import N11System
import N11Vault

/// Restores an archive into a vault of a home, creating the home's key store when a
/// portable archive is restored on a machine that has none (as `init` would), and taking
/// back what this run created if the restore fails: a failure leaves the machine as it was.
public enum HomeRestorer {
    public struct Report: Sendable {
        public let restore: ArchiveRestorer.Report
        /// The key store this run created, if it did.
        public let createdKeyStore: String?
        /// A dry run that only verified the archive: no key store here, or one whose PIN was
        /// not given (a dry run never prompts), so the vault was not compared.
        public var vaultNotCompared = false
    }

    /// Where to restore and how: `vaultPath` in `home`; `loadKeyStore` loads the home's key
    /// store (asking for its PIN) when the archive did not already need it.
    public struct Destination {
        public let home: N11Home
        public let vaultPath: String
        public let lockWait: Double
        public let loadKeyStore: () throws -> KeyStore

        public init(home: N11Home, vaultPath: String, lockWait: Double, loadKeyStore: @escaping () throws -> KeyStore) {
            self.home = home
            self.vaultPath = vaultPath
            self.lockWait = lockWait
            self.loadKeyStore = loadKeyStore
        }
    }

    /// `unlock` opens the archive (given whether the home had a key store beforehand) and
    /// returns the key store it loaded, if any. A dry run on a machine without a key store
    /// only verifies.
    public static func restore(_ unlock: () throws -> (UnlockedArchive, KeyStore?), into destination: Destination,
                               _ options: RestoreOptions, progress: ArchiveProgress? = nil) throws(ArchiveError) -> Report {
        do { return try restoreUnchecked(unlock, into: destination, options, progress: progress) }
        catch { throw ArchiveError.wrap(error) }
    }

    private static func restoreUnchecked(_ unlock: () throws -> (UnlockedArchive, KeyStore?), into destination: Destination,
                                         _ options: RestoreOptions, progress: ArchiveProgress?) throws -> Report {
        let hasKeyStore = ((try? FileStatus.of(destination.home.keyStorePath)) ?? nil) != nil
        let (archive, unlockedStore) = try unlock()
        let portable = archive.header.mode == .portable
        // `keyStore` nil: the vault was not compared (no key store, or a PIN not given);
        // given, there is no vault yet and every item would be restored.
        func verifyOnly(keyStore: KeyStore? = nil) throws -> Report {
            let selected = try archive.selected(options.selection)
            var report = ArchiveRestorer.Report(for: archive)
            report.dryRun = true
            report.destination = destination.vaultPath
            try ArchiveVerifier.checkAll(archive, selected, keyStore: keyStore, salvage: options.salvage ? { _, item, error in
                report.damaged.append(DamagedItem(item, error))
            } : nil, progress: progress) { n, item in
                report.record(.restored, index: selected[n])
                report.plaintextBytes += item.size
            }
            progress?.finish()
            var result = Report(restore: report, createdKeyStore: nil)
            result.vaultNotCompared = keyStore == nil
            return result
        }
        if !hasKeyStore && portable && options.dryRun { return try verifyOnly() }
        var createdKeyStore = false
        let keyStore: KeyStore
        if let unlockedStore {
            keyStore = unlockedStore
        } else if portable && options.dryRun {
            // A dry run of a portable archive needs no key store (README): a PIN-protected
            // one whose PIN was not given is not prompted for, the archive is only verified.
            do { keyStore = try destination.loadKeyStore() }
            catch VaultError.keyStoreLocked { return try verifyOnly() }
        } else if !hasKeyStore && portable {
            // Held locked until the restore is done: nobody can start using keys that a
            // failed restore takes back.
            // A new home signs what it will write, as one made by `init` does.
            keyStore = try KeyStore.create(in: destination.home, pin: nil, holdingLock: true, signing: true)
            createdKeyStore = true
        } else {
            keyStore = try destination.loadKeyStore()
        }
        defer { keyStore.releaseHomeLock() }
        // Take back what this run made, and only that (`HomeTakeBack`): on a failure, and on
        // Ctrl-C or SIGTERM before the restore commits.
        let created = HomeTakeBack(keyStore: keyStore, createdKeyStore: createdKeyStore)
        let interrupted = Interruption.onInterrupt { created.takeBack() }
        defer { Interruption.cancel(interrupted) }
        // A dry run into a vault that is not there yet (`--vault NEWDIR`): the restore would
        // create it, so every item would be restored; nothing is made.
        if options.dryRun, try FileStatus.of(destination.vaultPath, followLinks: true) == nil {
            return try verifyOnly(keyStore: keyStore)
        }
        do {
            let vault = try Vault.open(at: destination.vaultPath, keyStore: keyStore, forWriting: !options.dryRun,
                                       lockWait: destination.lockWait, claim: { created.vault = $0 })
            let report = try ArchiveRestorer.restore(archive, into: vault, options, progress: progress)
            return Report(restore: report, createdKeyStore: createdKeyStore ? keyStore.path : nil)
        } catch {
            Interruption.critical { created.takeBack() }
            // The key store the message would name is gone again: say what happened instead.
            if createdKeyStore, case VaultError.vaultMismatch(let vaultPath, _) = error {
                throw VaultError.vaultNeedsItsKeyStore(vault: vaultPath, home: destination.home.root)
            }
            throw error
        }
    }
}
