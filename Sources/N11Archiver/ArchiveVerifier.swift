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
        let payloads = try startPayloads(archive, indices, progress: progress)
        defer { payloads.finish() }
        try checkAll(archive, indices, payloads: payloads, keyStore: keyStore, progress: progress) { _ in }
        progress?.finish()
        return Report(items: indices.count, plaintextBytes: archive.manifest.items.reduce(0) { $0 + $1.size })
    }

    /// Announces the totals of items `indices` to `progress` and starts reading their payloads
    /// on a worker (see `UnlockedArchive.payloads`); the caller calls `finish()` on it.
    static func startPayloads(_ archive: UnlockedArchive, _ indices: [Int],
                              progress: ArchiveProgress?) throws(ArchiveError) -> ReadAhead {
        progress?.begin(items: indices.count, bytes: indices.reduce(0) { $0 + archive.manifest.items[$1].size })
        let payloads = archive.payloads(indices)
        do { try payloads.start() } catch { throw .system(error) }
        return payloads
    }

    /// Checks items `indices`, in order, from `payloads` (made by `startPayloads` for the same
    /// indices), writing nothing; `verified(n)` follows each item that held.
    static func checkAll(_ archive: UnlockedArchive, _ indices: [Int], payloads: ReadAhead, keyStore: KeyStore?,
                         progress: ArchiveProgress?, verified: (Int) -> Void) throws(ArchiveError) {
        for (n, index) in indices.enumerated() {
            do {
                try checkItem(archive, index: index, payload: payloads.stream(n), keyStore: keyStore, into: DiscardingSink(),
                              progress: progress)
            } catch { throw ArchiveError.itemFailed(archive: archive.reader.name, id: archive.manifest.items[index].id, error) }
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
