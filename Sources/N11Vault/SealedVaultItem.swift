import N11Crypto
import N11Format
import N11System

/// One vault item file (seed 003): 12-byte nonce ‖ ChaCha20-Poly1305 ciphertext ‖ 16-byte tag,
/// under the key of the item's compartment. The one place that knows that layout, its key and
/// its checks: callers (the archiver above all) ask for the plaintext, for the file sealed
/// again under another key, or for a file from elsewhere checked, and never see a vault key
/// or a vault path.
///
/// An opened item has already passed the cheap checks (size and tag as the metadata
/// recorded), which catch swapped or truncated files before any decryption.
public final class SealedVaultItem {
    public static let algorithm = AEADAlgorithm.chacha20Poly1305
    /// Bytes a sealed file adds to its plaintext: nonce and tag (FORMAT.md's "+ 28").
    public static let overhead = SingleTagStream.overhead

    public let metadata: ItemMetadata
    /// Where the file is, for messages only.
    public let path: String
    private let file: FileDescriptor
    /// A small file's bytes, read whole when it was opened: one read, where checking the tag
    /// and then reading the payload took two seeks and three reads (issue 29: most items of
    /// a notes vault are a few hundred bytes). Nil for a larger file, read through `file`.
    private let contents: [UInt8]?
    /// Files up to this size are read whole (`contents`).
    static let wholeReadLimit: Int64 = 64 << 10
    private let key: SecureBytes

    /// Opens the content file of `item`, the first of `paths` that exists (where a committed
    /// change left it, then its place: `Vault.contentPaths`), checking its size and tag.
    init(_ item: ItemMetadata, paths: [String], keyStore: KeyStore) throws(VaultError) {
        metadata = item
        path = paths.last ?? ""
        // The key the record opened under (a retired one only while a rotation's pending steps
        // are being carried out, or for a reader that started before it).
        key = item.keyID.isEmpty ? keyStore.key(for: item.compartment) : try keyStore.key(for: item.compartment, id: item.keyID)
        do {
            file = try Self.openFirst(of: paths)
            let status = try file.status()
            guard status.kind == .regular, status.size == item.size + Int64(Self.overhead) else {
                throw VaultError.itemDamaged(id: item.id, path: path)
            }
            if status.size <= Self.wholeReadLimit {
                var bytes = [UInt8](repeating: 0, count: Int(status.size))
                // The tag is the last bytes (an Array slice: `suffix` here resolved to
                // Sequence's, which walks every byte of the item through a ring buffer).
                guard try file.readFully(into: &bytes, count: bytes.count) == bytes.count,
                      Array(bytes[max(0, bytes.count - AEADAlgorithm.tagLength)...]).hex == item.contentTag else {
                    throw VaultError.itemDamaged(id: item.id, path: path)
                }
                contents = bytes
            } else {
                var tag = [UInt8](repeating: 0, count: AEADAlgorithm.tagLength)
                try file.seek(to: status.size - Int64(tag.count))
                guard try file.readFully(into: &tag, count: tag.count) == tag.count, tag.hex == item.contentTag else {
                    throw VaultError.itemDamaged(id: item.id, path: path)
                }
                contents = nil
            }
        } catch let error as SystemError where error.isNotFound {
            throw .contentMissing(id: item.id, path: path)
        } catch { throw VaultError.wrap(error) }
    }

    /// The sealed file from its first byte: the bytes read at opening, a large file out of
    /// the page cache read around it (`DirectFileReader`), or the file rewound. A larger
    /// file's sources share the one open file, so an item is read by one consumer at a time
    /// (every caller reads it through once); each small one's has its own.
    private func sealedBytes() throws -> ByteSource {
        if let contents { return MemorySource(contents) }
        if let direct = DirectFileReader.ifUncached(file, size: metadata.size + Int64(Self.overhead)) { return direct }
        try file.seek(to: 0)
        return file
    }

    private static func openFirst(of paths: [String]) throws -> FileDescriptor {
        for candidate in paths.dropLast() {
            do { return try FileDescriptor.openForReading(candidate, leavingAccessTime: true) }
            catch let error as SystemError where error.isNotFound { continue }
        }
        return try FileDescriptor.openForReading(paths.last ?? "", leavingAccessTime: true)
    }

    // MARK: out of the vault

    /// Decrypts the item into `sink`; returns normally only if its tag verified and its length
    /// is the recorded one. Until then the sink must keep what it got out of sight (see
    /// `UnverifiedPlaintextSink`). Reads from the start of the file each time.
    public func read(into sink: UnverifiedPlaintextSink) throws(VaultError) {
        do {
            let length = try SingleTagStream.open(Self.algorithm, key: key, from: try sealedBytes(), into: sink, sizeHint: metadata.size)
            guard length == metadata.size else { throw VaultError.itemDamaged(id: metadata.id, path: path) }
        } catch let error as CryptoError where error.kind == .damaged {
            throw .itemDamaged(id: metadata.id, path: path)
        } catch { throw VaultError.wrap(error) }
    }

    /// The plaintext sealed again as a chunked stream under `key` (a portable archive's entry).
    /// The item's tag and digest are checked before the last chunk is produced.
    public func resealedInChunks(under key: SecureBytes) throws(VaultError) -> ByteSource {
        let digest = [UInt8](hex: metadata.sha256, length: 32) ?? []
        do {
            return NamingItemFailures(try Resealing.singleTagToChunked(try sealedBytes(), algorithm: Self.algorithm, openKey: self.key,
                                                                        sealKey: key, expectedSHA256: digest,
                                                                        expectedLength: metadata.size), item: self)
        } catch { throw VaultError.wrap(error) }
    }

    /// The file as it is, wrapped in a chunked stream under `key` (a secure archive's entry),
    /// its inner tag and digest checked on the way.
    public func wrappedInChunks(under key: SecureBytes) throws(VaultError) -> ByteSource {
        let digest = [UInt8](hex: metadata.sha256, length: 32) ?? []
        do {
            return NamingItemFailures(try Resealing.wrapSingleTag(try sealedBytes(), algorithm: Self.algorithm, innerKey: self.key,
                                                                   sealKey: key, expectedSHA256: digest,
                                                                   expectedLength: metadata.size), item: self)
        } catch { throw VaultError.wrap(error) }
    }

    /// What a version 3 pack carries of the item, checked on the way (tag, length, digest):
    /// its plaintext (portable), or the vault file as it is (`asVaultFile`, secure). Only to
    /// be sealed: see `Resealing.checkedPlaintext`.
    public func checkedPayload(asVaultFile: Bool) throws(VaultError) -> ByteSource {
        let digest = [UInt8](hex: metadata.sha256, length: 32) ?? []
        do {
            let sealed = try sealedBytes()
            let source = asVaultFile
                ? try Resealing.checkedSingleTag(sealed, algorithm: Self.algorithm, key: key, expectedSHA256: digest, expectedLength: metadata.size)
                : try Resealing.checkedPlaintext(ofSingleTag: sealed, algorithm: Self.algorithm, key: key, expectedSHA256: digest,
                                                 expectedLength: metadata.size)
            return NamingItemFailures(source, item: self)
        } catch { throw VaultError.wrap(error) }
    }

    /// The file sealed anew under `newKey` into `output` (a key rotation); its tag and digest
    /// are checked before the new tag is written. Returns the new tag.
    func reseal(under newKey: SecureBytes, to output: ByteSink, progress: VaultChangeProgress?) throws -> [UInt8] {
        do {
            let sealed = try sealedBytes()
            let input: ByteSource = progress.map { ProgressCountingSource(sealed, progress: $0) } ?? sealed
            return try Self.reseal(input, as: description, openKey: key, key: newKey, to: output)
        } catch let error as CryptoError where error.kind == .damaged {
            throw VaultError.itemDamaged(id: metadata.id, path: path)
        }
    }

    private var description: VaultStaging.Description {
        .init(id: metadata.id, kind: metadata.kind, compartment: metadata.compartment, name: metadata.name,
              created: metadata.created, expires: metadata.expires, size: metadata.size, sha256: metadata.sha256)
    }

    // MARK: into the vault

    /// Checks a sealed item file that comes from elsewhere (a secure archive's payload) as the
    /// item `expected` describes: its tag under `key` (the compartment key it was sealed
    /// under), its length and digest. The plaintext goes to `sink`, which must stage it until
    /// this returns. Returns the tag.
    @discardableResult
    public static func check(_ sealed: ByteSource, as expected: VaultStaging.Description, key: SecureBytes,
                             into sink: UnverifiedPlaintextSink = DiscardingSink()) throws -> [UInt8] {
        let tail = TagKeepingSource(sealed)
        let hashing = try DigestSink(forwardingTo: sink)
        try SingleTagStream.open(algorithm, key: key, from: tail, into: hashing,
                                 sizeHint: expected.size)
        guard hashing.length == expected.size, try hashing.finish() == expected.sha256Bytes else {
            throw CryptoError.contentMismatch
        }
        return tail.lastBytes
    }

    /// Seals verified-on-the-way plaintext into a new item file under `key` (a portable
    /// archive's payload, or a file being added): the digest and length are checked as the
    /// last byte is read. Returns the tag.
    static func seal(_ plaintext: ByteSource, as expected: VaultStaging.Description, key: SecureBytes,
                     to file: ByteSink) throws -> [UInt8] {
        let checked = try DigestCheckingSource(plaintext, expectedSHA256: expected.sha256Bytes, expectedLength: expected.size)
        return try SingleTagStream.seal(algorithm, key: key, from: checked, to: file, sizeHint: expected.size).tag
    }

    /// Seals the plaintext of a sealed item file (under `openKey`) anew under `key`: a key
    /// rotation, or a secure archive's item sealed under a retired key. Its tag, length and
    /// digest are checked before the last byte is read, so a bad input fails the seal.
    static func reseal(_ sealed: ByteSource, as expected: VaultStaging.Description, openKey: SecureBytes,
                       key: SecureBytes, to file: ByteSink) throws -> [UInt8] {
        try Resealing.singleTagToSingleTag(sealed, algorithm: algorithm, openKey: openKey, sealKey: key,
                                           expectedSHA256: expected.sha256Bytes, expectedLength: expected.size, to: file)
    }

    /// Seals a new item's plaintext (`vault add`), whose length and digest are known only
    /// once it has been read.
    static func sealNew(_ plaintext: ByteSource, key: SecureBytes, to sink: ByteSink,
                        sizeHint: Int64? = nil) throws -> (tag: [UInt8], size: Int64, sha256: String) {
        let hashing = try HashingSource(plaintext)
        let sealed = try SingleTagStream.seal(algorithm, key: key, from: hashing, to: sink, sizeHint: sizeHint)
        return (sealed.tag, sealed.plaintextLength, hashing.sha256.hex)
    }
}

/// Names the vault item when its content fails a check while it is being read (an archive
/// being written pulls it long after it was opened).
private final class NamingItemFailures: ByteSource {
    private let source: ByteSource
    private let id: String
    private let path: String

    init(_ source: ByteSource, item: SealedVaultItem) {
        self.source = source
        id = item.metadata.id
        path = item.path
    }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        do { return try source.read(into: &buffer, offset: offset, count: count) }
        catch let error as CryptoError where error.kind == .damaged {
            throw VaultError.itemDamaged(id: id, path: path)
        }
    }
}

/// Passes a source through, keeping its last 16 bytes (a sealed file's tag).
final class TagKeepingSource: ByteSource {
    private let source: ByteSource
    private(set) var lastBytes: [UInt8] = []

    init(_ source: ByteSource) { self.source = source }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        let n = try source.read(into: &buffer, offset: offset, count: count)
        if n > 0 {
            let tail = buffer[max(offset, offset + n - AEADAlgorithm.tagLength)..<(offset + n)]
            lastBytes = Array((lastBytes + tail).suffix(AEADAlgorithm.tagLength))
        }
        return n
    }
}

/// Passes a source through, telling `progress` how many bytes went by.
final class ProgressCountingSource: ByteSource {
    private let source: ByteSource
    private let progress: VaultChangeProgress

    init(_ source: ByteSource, progress: VaultChangeProgress) {
        self.source = source
        self.progress = progress
    }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        let n = try source.read(into: &buffer, offset: offset, count: count)
        if n > 0 { progress.add(bytes: Int64(n)) }
        return n
    }
}
