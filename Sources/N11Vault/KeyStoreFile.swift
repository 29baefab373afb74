import N11Crypto
import N11Format
import N11System

// The key store file's byte layout (see `KeyStore` for the picture): records, the sealed or
// checksummed envelope, and reading and writing them. `KeyStore` owns the policy (locks,
// permissions, when to save); this file only turns keys into bytes and back.
extension KeyStore {
    static let magic: [UInt8] = Array("N11KEYS\0".utf8)
    static let recordSize = 1 + 16 + 32

    /// Kinds 6…14 exist only in version 2 files (written once a rotation has happened) and
    /// 15, 16 only in version 3 files, so that an older n11archive says "unknown key store
    /// version", not "malformed".
    enum RecordKind: UInt8 {
        case vault = 1, fade = 2, backup = 3, archive = 4, identity = 5
        case retiredVault = 6, retiredFade = 7, retiredBackup = 8
        case pendingVault = 9, pendingFade = 10, pendingBackup = 11
        case forgottenVault = 12, forgottenFade = 13, forgottenBackup = 14
        /// The home's Ed25519 signing key (its seed; id = the first 16 bytes of the public
        /// key's SHA-256). At most one.
        case signing = 15
        /// A trusted signer's Ed25519 public key (id as for `signing`): only in a backup
        /// (`key backup`), which carries the home's trusted signers along with its keys.
        case trustedSigner = 16

        /// The oldest file version that may hold this kind.
        var fileVersion: UInt8 { rawValue <= 5 ? 1 : rawValue <= 14 ? 2 : 3 }

        enum Role: UInt8 { case current = 1, retired = 6, pending = 9, forgotten = 12 }

        init(_ role: Role, _ compartment: Compartment) {
            let offset: UInt8 = switch compartment { case .vault: 0; case .fade: 1; case .backup: 2 }
            self.init(rawValue: role.rawValue + offset)!
        }

        /// The compartment and role of a compartment key record; nil for the other kinds.
        var compartmentKey: (Compartment, Role)? {
            let role: Role
            switch rawValue {
            case 1...3: role = .current
            case 6...8: role = .retired
            case 9...11: role = .pending
            case 12...14: role = .forgotten
            default: return nil
            }
            return ([Compartment.vault, .fade, .backup][Int(rawValue - role.rawValue)], role)
        }
    }

    struct Record {
        let kind: RecordKind
        let id: [UInt8]
        let key: SecureBytes
    }

    /// Every compartment's keys (parse and create guarantee a current key for each).
    struct CompartmentKeys {
        var rings: [Compartment: CompartmentKeyRing]

        subscript(compartment: Compartment) -> CompartmentKeyRing {
            get { rings[compartment]! }
            set { rings[compartment] = newValue }
        }

        /// The records: the current keys first (as version 1 wrote them), then each
        /// compartment's history, oldest first: forgotten, retired, pending.
        func records() throws -> [Record] {
            let zero = [UInt8](repeating: 0, count: 16)
            var records = Compartment.allCases.map { Record(kind: RecordKind(.current, $0), id: zero, key: self[$0].current) }
            for compartment in Compartment.allCases {
                let ring = self[compartment]
                for id in ring.forgotten {
                    records.append(Record(kind: RecordKind(.forgotten, compartment), id: id, key: try SecureBytes(count: 32)))
                }
                for key in ring.retired {
                    records.append(Record(kind: RecordKind(.retired, compartment), id: try CompartmentKeyRing.id(of: key), key: key))
                }
                if let pending = ring.pending {
                    records.append(Record(kind: RecordKind(.pending, compartment), id: try CompartmentKeyRing.id(of: pending), key: pending))
                }
            }
            return records
        }
    }

    /// How the file is sealed when saved again (so adding an archive key needs no new PIN prompt).
    struct Sealing {
        let parameters: Argon2Parameters
        let salt: [UInt8]
        let key: SecureBytes
    }

    /// Parses the file (version 1, 2 or 3). `sealingKey` turns a sealed file's Argon2id parameters and salt into
    /// its key (from the PIN, or the key this process already derived).
    /// A `backup` (`key backup`'s file) must be sealed and may hold trusted signers (kind
    /// 16); a home's key store may not.
    static func parse(_ contents: SecureBytes, home: N11Home, backup: Bool = false,
                              sealingKey: (Argon2Parameters, [UInt8]) throws -> SecureBytes) throws -> KeyStore {
        let path = home.keyStorePath
        let damaged = { (why: String) in VaultError.keyStoreDamaged(path: path, reason: why) }
        var reader = contents.withUnsafeBytes { ByteReader(prefixOf: $0, count: min($0.count, 10 + 8 + 16)) }
        guard contents.count >= 10, reader.take(8) == magic else { throw damaged("not an n11archive key store") }
        let version = reader.byte()
        guard (1...3).contains(version) else { throw damaged("unknown key store version (made by a newer n11archive?)") }
        switch reader.byte() {
        case 0:
            // Anyone can write an unsealed file: as a backup it would bring in their keys and
            // trusted signers with no passphrase ever checked.
            guard !backup else { throw damaged("it is not sealed under a passphrase, as every key backup is") }
            guard contents.count >= 10 + 32 else { throw damaged("truncated") }
            guard try checksumMatches(contents) else { throw damaged("its checksum does not match") }
            return try parseBody(contents.slice(10..<(contents.count - 32)), version: version, home: home, sealing: nil, backup: backup)
        case let protection where protection == 1 || protection == 2:
            // Protection 2 adds a checksum of the whole file, checked before the PIN is tried:
            // a damaged file is reported as damaged, not as a wrong PIN (protection 1 files,
            // from before, cannot tell the two apart).
            let trailer = protection == 2 ? 32 : 0
            guard contents.count >= 10 + 8 + 16 + SingleTagStream.overhead + trailer else { throw damaged("truncated") }
            if protection == 2 {
                guard try checksumMatches(contents) else {
                    throw damaged("its checksum does not match, so the file changed on disk; the PIN was not tried")
                }
            }
            let ops = reader.uint32(), memoryKiB = reader.uint32()
            let salt = reader.take(16)
            let parameters: Argon2Parameters
            do { parameters = try Argon2Parameters(opsLimit: UInt64(ops), memoryBytes: UInt64(memoryKiB) << 10) }
            catch { throw damaged("PIN parameters out of bounds") }
            let headerLength = 10 + 8 + 16
            let header = contents.withUnsafeBytes { Array($0[0..<headerLength]) }
            let key = try sealingKey(parameters, salt)
            let sealed = contents.withUnsafeBytes { Array($0[headerLength..<($0.count - trailer)]) }
            let body: SecureBytes
            do { body = try AEAD.openSecret(.chacha20Poly1305, key: key, sealed: sealed, aad: header) }
            catch { throw error == .authenticationFailed ? VaultError.wrongPIN(path: path) : VaultError.crypto(error) }
            return try parseBody(body, version: version, home: home, sealing: Sealing(parameters: parameters, salt: salt, key: key), backup: backup)
        default:
            throw damaged("unknown protection")
        }
    }

    /// Whether the last 32 bytes are the SHA-256 of everything before them.
    private static func checksumMatches(_ contents: SecureBytes) throws -> Bool {
        let digest = try SHA256Digest()
        let stored = contents.withUnsafeBytes { raw in
            digest.update(raw: UnsafeRawBufferPointer(rebasing: raw[0..<(raw.count - 32)]))
            return Array(raw[(raw.count - 32)...])
        }
        return stored == (try digest.finish())
    }

    private static func parseBody(_ body: SecureBytes, version: UInt8, home: N11Home, sealing: Sealing?, backup: Bool) throws -> KeyStore {
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
            guard let kind = RecordKind(rawValue: kindByte), kind.fileVersion <= version, backup || kind != .trustedSigner else { throw damaged }
            if kind.compartmentKey?.1 == .current && id.contains(where: { $0 != 0 }) { throw damaged }
            records.append(Record(kind: kind, id: id, key: try body.slice((offset + 17)..<(offset + 49))))
        }
        // Each compartment: exactly one current key, at most one pending, and history records
        // whose id is their key's (a forgotten key keeps only its id).
        var rings: [Compartment: CompartmentKeyRing] = [:]
        for compartment in Compartment.allCases {
            let mine = records.filter { $0.kind.compartmentKey?.0 == compartment }
            let current = mine.filter { $0.kind.compartmentKey?.1 == .current }
            guard current.count == 1, mine.filter({ $0.kind.compartmentKey?.1 == .pending }).count <= 1 else { throw damaged }
            var ring = CompartmentKeyRing(current: current[0].key)
            for record in mine {
                switch record.kind.compartmentKey?.1 {
                case .retired?:
                    guard try CompartmentKeyRing.id(of: record.key) == record.id else { throw damaged }
                    ring.retired.append(record.key)
                case .pending?:
                    guard try CompartmentKeyRing.id(of: record.key) == record.id else { throw damaged }
                    ring.pending = record.key
                case .forgotten?: ring.forgotten.append(record.id)
                default: break
                }
            }
            rings[compartment] = ring
        }
        // An identity's id is the first 16 bytes of its public point's SHA-256: a scalar that
        // is no P-256 key, or does not match its id, is damage.
        var identities: [P256PrivateKey] = []
        for record in records where record.kind == .identity {
            guard let key = try? P256PrivateKey(scalar: record.key), try Self.identityID(key.publicKey) == record.id else { throw damaged }
            identities.append(key)
        }
        // One device key per archive: writers never add a second, and two for one archive
        // would leave a reader to guess which one is the archive's (FORMAT.md, Appendix B).
        let archiveRecords = records.filter { $0.kind == .archive }
        guard Set(archiveRecords.map(\.id)).count == archiveRecords.count else { throw damaged }
        // One signing key, whose id names its public key; trusted signers likewise named.
        let signingRecords = records.filter { $0.kind == .signing }
        guard signingRecords.count <= 1 else { throw damaged }
        var signingKey: Ed25519SigningKey? = nil
        if let record = signingRecords.first {
            guard let key = try? Ed25519SigningKey(seed: record.key), try Self.signerID(key.publicKey) == record.id else { throw damaged }
            signingKey = key
        }
        var trusted: [Ed25519PublicKey] = []
        for record in records where record.kind == .trustedSigner {
            let bytes = record.key.withUnsafeBytes { Array($0) }
            guard let key = try? Ed25519PublicKey(bytes: bytes), try Self.signerID(key) == record.id else { throw damaged }
            trusted.append(key)
        }
        let store = KeyStore(home: home, storeID: storeID, compartmentKeys: CompartmentKeys(rings: rings),
                             archiveRecords: archiveRecords, identities: identities, signingKey: signingKey, sealing: sealing)
        store.trustedSignersInBackup = trusted
        return store
    }

    static func identityID(_ key: P256PublicKey) throws -> [UInt8] { Array(try key.fingerprint.prefix(16)) }

    static func signerID(_ key: Ed25519PublicKey) throws -> [UInt8] { Array(try key.fingerprint.prefix(16)) }

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
        let version = records.map(\.kind.fileVersion).max() ?? 1
        var header = Self.magic + [version]
        if let sealing {
            header += [2]
            header += littleEndian(UInt32(sealing.parameters.opsLimit))
            header += littleEndian(UInt32(sealing.parameters.memoryBytes >> 10))
            header += sealing.salt
            let sealed = try AEAD.sealSecret(.chacha20Poly1305, key: sealing.key, secret: body, aad: header)
            let digest = try SHA256Digest()
            digest.update(header[...])
            digest.update(sealed[...])
            try file.write(header)
            try file.write(sealed)
            try file.write(try digest.finish())
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
