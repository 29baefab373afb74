import N11Crypto
import N11System

// The key store file's byte layout (see `KeyStore` for the picture): records, the sealed or
// checksummed envelope, and reading and writing them. `KeyStore` owns the policy (locks,
// permissions, when to save); this file only turns keys into bytes and back.
extension KeyStore {
    static let magic: [UInt8] = Array("N11KEYS\0".utf8)
    static let recordSize = 1 + 16 + 32

    enum RecordKind: UInt8 { case vault = 1, fade = 2, backup = 3, archive = 4, identity = 5 }

    struct Record {
        let kind: RecordKind
        let id: [UInt8]
        let key: SecureBytes
    }

    /// The three compartment keys every key store has (parse and create guarantee them).
    struct CompartmentKeys {
        let vault, fade, backup: SecureBytes

        var records: [Record] {
            let zero = [UInt8](repeating: 0, count: 16)
            return [Record(kind: .vault, id: zero, key: vault), Record(kind: .fade, id: zero, key: fade),
                    Record(kind: .backup, id: zero, key: backup)]
        }
    }

    /// How the file is sealed when saved again (so adding an archive key needs no new PIN prompt).
    struct Sealing {
        let parameters: Argon2Parameters
        let salt: [UInt8]
        let key: SecureBytes
    }

    /// Parses the file. `sealingKey` turns a sealed file's Argon2id parameters and salt into
    /// its key (from the PIN, or the key this process already derived).
    static func parse(_ contents: SecureBytes, home: N11Home,
                              sealingKey: (Argon2Parameters, [UInt8]) throws -> SecureBytes) throws -> KeyStore {
        let path = home.keyStorePath
        let damaged = { (why: String) in VaultError.keyStoreDamaged(path: path, reason: why) }
        var reader = contents.withUnsafeBytes { ByteReader(prefixOf: $0, count: min($0.count, 10 + 8 + 16)) }
        guard contents.count >= 10, reader.take(8) == magic else { throw damaged("not an n11archive key store") }
        guard reader.byte() == 1 else { throw damaged("unknown key store version") }
        switch reader.byte() {
        case 0:
            guard contents.count >= 10 + 32 else { throw damaged("truncated") }
            let digest = try SHA256Digest()
            let stored = contents.withUnsafeBytes { raw in
                digest.update(raw: UnsafeRawBufferPointer(rebasing: raw[0..<(raw.count - 32)]))
                return Array(raw[(raw.count - 32)...])
            }
            let computed = try digest.finish()
            guard stored == computed else { throw damaged("its checksum does not match") }
            return try parseBody(contents.slice(10..<(contents.count - 32)), home: home, sealing: nil)
        case 1:
            guard contents.count >= 10 + 8 + 16 + SingleTagStream.overhead else { throw damaged("truncated") }
            let ops = reader.uint32(), memoryKiB = reader.uint32()
            let salt = reader.take(16)
            let parameters: Argon2Parameters
            do { parameters = try Argon2Parameters(opsLimit: UInt64(ops), memoryBytes: UInt64(memoryKiB) << 10) }
            catch { throw damaged("PIN parameters out of bounds") }
            let headerLength = 10 + 8 + 16
            let header = contents.withUnsafeBytes { Array($0[0..<headerLength]) }
            let key = try sealingKey(parameters, salt)
            let sealed = contents.withUnsafeBytes { Array($0[headerLength...]) }
            let body: SecureBytes
            do { body = try AEAD.openSecret(.chacha20Poly1305, key: key, sealed: sealed, aad: header) }
            catch { throw error == .authenticationFailed ? VaultError.wrongPIN(path: path) : VaultError.crypto(error) }
            return try parseBody(body, home: home, sealing: Sealing(parameters: parameters, salt: salt, key: key))
        default:
            throw damaged("unknown protection")
        }
    }

    private static func parseBody(_ body: SecureBytes, home: N11Home, sealing: Sealing?) throws -> KeyStore {
        let damaged = VaultError.keyStoreDamaged(path: home.keyStorePath, reason: "the key records are malformed")
        guard body.count >= 20 else { throw damaged }
        let (storeID, count) = body.withUnsafeBytes { raw -> ([UInt8], Int) in
            var r = ByteReader(prefixOf: raw, count: 20)
            return (r.take(16), Int(r.uint32()))
        }
        guard body.count == 20 + count * recordSize else { throw damaged }
        var records: [Record] = []
        records.reserveCapacity(count)
        for i in 0..<count {
            let offset = 20 + i * recordSize
            let (kindByte, id) = body.withUnsafeBytes { raw in (raw[offset], Array(raw[(offset + 1)..<(offset + 17)])) }
            guard let kind = RecordKind(rawValue: kindByte) else { throw damaged }
            if kind != .archive && kind != .identity && id.contains(where: { $0 != 0 }) { throw damaged }
            records.append(Record(kind: kind, id: id, key: try body.slice((offset + 17)..<(offset + 49))))
        }
        func only(_ kind: RecordKind) -> SecureBytes? {
            let found = records.filter { $0.kind == kind }
            return found.count == 1 ? found[0].key : nil
        }
        guard let vault = only(.vault), let fade = only(.fade), let backup = only(.backup) else { throw damaged }
        // An identity's id is the first 16 bytes of its public point's SHA-256: a scalar that
        // is no P-256 key, or does not match its id, is damage.
        var identities: [P256PrivateKey] = []
        for record in records where record.kind == .identity {
            guard let key = try? P256PrivateKey(scalar: record.key), try Self.identityID(key.publicKey) == record.id else { throw damaged }
            identities.append(key)
        }
        return KeyStore(home: home, storeID: storeID, compartmentKeys: CompartmentKeys(vault: vault, fade: fade, backup: backup),
                        archiveRecords: records.filter { $0.kind == .archive }, identities: identities, sealing: sealing)
    }

    static func identityID(_ key: P256PublicKey) throws -> [UInt8] { Array(try key.fingerprint.prefix(16)) }

    /// Writes the file's bytes for these records to `file`: sealed under `sealing`'s key
    /// when there is one, else followed by their SHA-256.
    static func write(storeID: [UInt8], records: [Record], sealing: Sealing?, to file: FileDescriptor) throws {
        let body = try SecureBytes(count: 20 + records.count * recordSize)
        body.withUnsafeMutableBytes { raw in
            var w = ByteWriter(into: raw)
            w.put(storeID)
            w.putUInt32(UInt32(records.count))
            for record in records {
                w.put([record.kind.rawValue])
                w.put(record.id)
                record.key.withUnsafeBytes { w.put(raw: $0) }
            }
        }
        var header = Self.magic + [1]
        if let sealing {
            header += [1]
            header += littleEndian(UInt32(sealing.parameters.opsLimit))
            header += littleEndian(UInt32(sealing.parameters.memoryBytes >> 10))
            header += sealing.salt
            try file.write(header)
            try file.write(AEAD.sealSecret(.chacha20Poly1305, key: sealing.key, secret: body, aad: header))
        } else {
            header += [0]
            let digest = try SHA256Digest()
            digest.update(header[...])
            try file.write(header)
            try body.withUnsafeBytes { raw in
                digest.update(raw: raw)
                try file.write(raw: raw)
            }
            try file.write(try digest.finish())
        }
    }
}

func littleEndian(_ value: UInt32) -> [UInt8] {
    (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * UInt32($0))) }
}

/// Sequential reads from a bounded prefix of a buffer (copied, so no pointer escapes).
struct ByteReader {
    private let bytes: [UInt8]
    private var offset = 0

    init(prefixOf raw: UnsafeRawBufferPointer, count: Int) { bytes = Array(raw[0..<count]) }

    mutating func take(_ n: Int) -> [UInt8] {
        let end = min(offset + n, bytes.count)
        defer { offset = end }
        return Array(bytes[offset..<end])
    }
    mutating func byte() -> UInt8 { take(1).first ?? 0 }
    mutating func uint32() -> UInt32 {
        take(4).enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
    }
}

/// Sequential writes into a buffer of exactly the right size (locked memory, here).
struct ByteWriter {
    private let raw: UnsafeMutableRawBufferPointer
    private var offset = 0

    init(into raw: UnsafeMutableRawBufferPointer) { self.raw = raw }

    mutating func put(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { put(raw: $0) }
    }
    mutating func put(raw source: UnsafeRawBufferPointer) {
        raw.baseAddress!.advanced(by: offset).copyMemory(from: source.baseAddress!, byteCount: source.count)
        offset += source.count
    }
    mutating func putUInt32(_ value: UInt32) { put(littleEndian(value)) }
}
