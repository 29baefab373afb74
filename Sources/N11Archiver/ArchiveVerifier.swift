import Foundation
import N11Crypto
import N11Format
import N11System
import N11Vault

/// Checks every tag of an unlocked archive — each chunk of each entry, and in secure mode
/// the inner ChaCha20-Poly1305 tag of each vault file — plus every item's size and SHA-256,
/// writing nothing.
public enum ArchiveVerifier {
    public struct Report: Sendable {
        public let items: Int
        public let plaintextBytes: Int64
    }

    /// `keyStore` provides the compartment keys for a secure archive's inner tags;
    /// `progress` counts each item's plaintext as its chunks verify.
    public static func verify(_ archive: UnlockedArchive, keyStore: KeyStore?,
                              progress: ArchiveProgress? = nil) throws(ArchiveError) -> Report {
        let indices = Array(archive.manifest.items.indices)
        try checkAll(archive, indices, keyStore: keyStore, salvage: nil, progress: progress) { _ in }
        progress?.finish()
        return Report(items: indices.count, plaintextBytes: archive.manifest.items.reduce(0) { $0 + $1.size })
    }

    /// Runs `body(n, payload)` for items `indices`, in order, their payloads read on a worker
    /// (see `UnlockedArchive.payloads`), after announcing their totals to `progress`. Without
    /// `salvage` the first failure is thrown. With it, an item whose payload or checks fail as
    /// damaged (or whose entry is missing) goes to `salvage` and the pass goes on from the
    /// next item on a fresh reader; `body` must leave nothing of a failed item behind. Other
    /// failures (a full disk, say) are thrown either way.
    static func forEachItem(_ archive: UnlockedArchive, _ indices: [Int], progress: ArchiveProgress?,
                            salvage: ((Int, ArchiveError) -> Void)?,
                            _ body: (Int, ByteSource) throws -> Void) throws(ArchiveError) {
        progress?.begin(items: indices.count, bytes: indices.reduce(0) { $0 + archive.manifest.items[$1].size })
        var next = 0
        while next < indices.count {
            let first = next
            let payloads = archive.payloads(Array(indices[first...]))
            defer { payloads.finish() }
            do { try payloads.start() } catch { throw .system(error) }
            while next < indices.count {
                let n = next
                next += 1
                do { try body(n, payloads.stream(n - first)) } catch {
                    let failure = ArchiveError.itemFailed(archive: archive.reader.name, id: archive.manifest.items[indices[n]].id, error)
                    guard let salvage, failure.kind == .damaged else { throw failure }
                    salvage(n, failure)
                    break   // the reader stops at a failed stream: start another after it
                }
            }
        }
    }

    /// Checks items `indices`, in order, writing nothing; `verified(n)` follows each item that
    /// held (see `forEachItem` for `salvage`).
    static func checkAll(_ archive: UnlockedArchive, _ indices: [Int], keyStore: KeyStore?,
                         salvage: ((Int, ArchiveError) -> Void)?, progress: ArchiveProgress?,
                         verified: (Int) -> Void) throws(ArchiveError) {
        try forEachItem(archive, indices, progress: progress, salvage: salvage) { n, payload in
            try checkItem(archive, index: indices[n], payload: payload, keyStore: keyStore, into: DiscardingSink(),
                          progress: progress)
            verified(n)
        }
    }

    /// Reads item `index` fully from `payload` (its verified payload, see
    /// `UnlockedArchive.payloads`), verifying every tag, its size and digest; the plaintext goes
    /// to `sink`, which must stage it (see `UnverifiedPlaintextSink`) until this returns.
    static func checkItem(_ archive: UnlockedArchive, index: Int, payload source: ByteSource, keyStore: KeyStore?,
                          into sink: UnverifiedPlaintextSink, progress: ArchiveProgress? = nil) throws {
        let item = archive.manifest.items[index]
        let digest = item.sha256Bytes
        let payload = progress.counting(source, size: item.size)
        switch archive.header.mode {
        case .portable:
            let checked = try DigestCheckingSource(payload, expectedSHA256: digest, expectedLength: item.size)
            var buffer = [UInt8].scratch(count: SingleTagStream.bufferSize(for: item.size))
            defer { buffer.wipe() }
            while true {
                let n = try checked.read(into: &buffer, offset: 0, count: buffer.count)
                if n == 0 { break }
                try sink.stage(buffer[0..<n])
            }
        case .secure:
            guard let keyStore else { throw ArchiveError.keyNotHere(archive: archive.reader.name, archiveID: archive.header.archiveIDHex) }
            try SealedVaultItem.check(payload, as: item.vaultDescription, key: try archive.compartmentKey(of: item, in: keyStore),
                                      into: sink)
        }
        progress.complete(payload)
    }
}

extension UnlockedArchive {
    /// The compartment key a secure archive's item file is sealed under: the one its
    /// manifest names (current or retired), or for an archive from before key IDs the
    /// compartment's first key.
    func compartmentKey(of item: Manifest.Item, in keyStore: KeyStore) throws -> SecureBytes {
        try keyStore.key(for: item.compartment, id: manifest.vaultKeys?[item.compartment])
    }
}
