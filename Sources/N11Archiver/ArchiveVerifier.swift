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
        var total: Int64 = 0
        progress?.begin(items: archive.manifest.items.count, bytes: archive.manifest.items.reduce(0) { $0 + $1.size })
        let indices = Array(archive.manifest.items.indices)
        let payloads = archive.payloads(indices)
        defer { payloads.finish() }
        do { try payloads.start() } catch { throw .system(error) }
        for index in indices {
            let item = archive.manifest.items[index]
            do {
                try checkItem(archive, index: index, payload: payloads.stream(index), keyStore: keyStore, into: DiscardingSink(),
                              progress: progress)
            } catch { throw ArchiveError.itemFailed(archive: archive.reader.path, id: item.id, error) }
            total += item.size
        }
        progress?.finish()
        return Report(items: archive.manifest.items.count, plaintextBytes: total)
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
            let checked = DigestCheckingSource(payload, expectedSHA256: digest, expectedLength: item.size)
            var buffer = [UInt8].scratch(count: SingleTagStream.bufferSize(for: item.size))
            defer { buffer.wipe() }
            while true {
                let n = try checked.read(into: &buffer, offset: 0, count: buffer.count)
                if n == 0 { break }
                try sink.stage(buffer[0..<n])
            }
        case .secure:
            guard let keyStore else { throw ArchiveError.keyNotHere(archive: archive.reader.path, archiveID: archive.header.archiveIDHex) }
            let hashing = DigestSink(forwardingTo: sink)
            try SingleTagStream.open(.chacha20Poly1305, key: keyStore.key(for: item.compartment.vaultCompartment),
                                     from: payload, into: hashing, sizeHint: item.size)
            guard hashing.length == item.size, hashing.finish() == digest else { throw CryptoError.contentMismatch }
        }
        progress.complete(payload)
    }
}

extension ArchiveError {
    /// A failure while reading one item, naming it.
    static func itemFailed(archive: String, id: String, _ error: any Error) -> ArchiveError {
        let translated = reading(archive, error)
        if case .damaged(let a, let what) = translated { return .damaged(archive: a, what: "item \(id): \(what)") }
        return translated
    }
}
