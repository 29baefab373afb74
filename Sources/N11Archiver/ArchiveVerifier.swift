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
        try checkAll(archive, archive.items.indices, keyStore: keyStore, salvage: nil, progress: progress) { _, _ in }
        progress?.finish()
        return Report(items: archive.items.count, plaintextBytes: archive.items.plaintextBytes)
    }

    /// Runs `body(n, item, payload)` for items `indices`, in order, their payloads read on a
    /// worker (see `UnlockedArchive.payloads`), after announcing their totals to `progress`.
    /// Without `salvage` the first failure is thrown. With it, an item whose payload or checks
    /// fail as damaged (or whose entry is missing) goes to `salvage` and the pass goes on from
    /// the next item on a fresh reader; `body` must leave nothing of a failed item behind.
    /// Other failures (a full disk, say) are thrown either way. Items are taken from the
    /// archive one at a time (a version 3 page at a time), never all at once. An archive read
    /// as it downloads is checked whole at the end (`ArchiveReader.checkWhole`).
    static func forEachItem<Indices: RandomAccessCollection<Int>>(
        _ archive: UnlockedArchive, _ indices: Indices, progress: ArchiveProgress?,
        salvage: ((Int, Manifest.Item, ArchiveError) -> Void)?,
        _ body: (Int, Manifest.Item, ByteSource) throws -> Void) throws(ArchiveError) where Indices.Index == Int {
        if let progress {
            var bytes: Int64 = 0
            if indices.count == archive.items.count { bytes = archive.items.plaintextBytes }
            else { for index in indices { bytes += try archive.items.item(index).size } }
            progress.begin(items: indices.count, bytes: bytes)
        }
        let start = indices.startIndex
        var next = 0
        while next < indices.count {
            let first = next
            let payloads = archive.payloads(indices[(start + first)...])
            defer { payloads.finish() }
            do { try payloads.start() } catch { throw .system(error) }
            while next < indices.count {
                let n = next
                next += 1
                let item = try archive.items.item(indices[start + n])
                do { try body(n, item, payloads.stream(n - first)) } catch {
                    let failure = ArchiveError.itemFailed(archive: archive.reader.name, id: item.id, error)
                    guard let salvage, failure.kind == .damaged else { throw failure }
                    salvage(n, item, failure)
                    break   // the reader stops at a failed stream: start another after it
                }
            }
        }
        // Read as it downloaded: the rest of the file arrived and its ZIP holds together,
        // before the caller makes anything visible.
        try archive.reader.checkWhole()
    }

    /// Checks items `indices`, in order, writing nothing; `verified(n, item)` follows each
    /// item that held (see `forEachItem` for `salvage`).
    static func checkAll<Indices: RandomAccessCollection<Int>>(
        _ archive: UnlockedArchive, _ indices: Indices, keyStore: KeyStore?,
        salvage: ((Int, Manifest.Item, ArchiveError) -> Void)?, progress: ArchiveProgress?,
        verified: (Int, Manifest.Item) -> Void) throws(ArchiveError) where Indices.Index == Int {
        try forEachItem(archive, indices, progress: progress, salvage: salvage) { n, item, payload in
            try checkItem(archive, item, payload: payload, keyStore: keyStore, into: DiscardingSink(), progress: progress)
            verified(n, item)
        }
    }

    /// Reads `item` fully from `payload` (its verified payload, see
    /// `UnlockedArchive.payloads`), verifying every tag, its size and digest; the plaintext goes
    /// to `sink`, which must stage it (see `UnverifiedPlaintextSink`) until this returns.
    static func checkItem(_ archive: UnlockedArchive, _ item: Manifest.Item, payload source: ByteSource, keyStore: KeyStore?,
                          into sink: UnverifiedPlaintextSink, progress: ArchiveProgress? = nil) throws {
        let digest = item.sha256Bytes
        let payload = progress.counting(source, size: item.size)
        switch archive.header.mode {
        case .portable:
            let checked = try DigestCheckingSource(payload, expectedSHA256: digest, expectedLength: item.size)
            var buffer = StreamBuffers.take(count: SingleTagStream.bufferSize(for: item.size))
            defer { StreamBuffers.give(&buffer, used: buffer.count) }
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
        try keyStore.key(for: item.compartment, id: items.vaultKeys?[item.compartment])
    }
}
