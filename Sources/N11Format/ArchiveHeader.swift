import Foundation
import N11System

/// `header.json` (FORMAT.md §2): everything a reader needs before it has a key. Its exact
/// bytes are authenticated (version 1: as the key wrap's associated data; version 2: by
/// `header.mac`), so they are kept, never re-serialised.
public struct ArchiveHeader: Sendable, Equatable {
    /// One way to the content key (version 2, FORMAT.md §4): a password, a P-256 recipient,
    /// or the creating machine's device key. Recipient slots do not say whose key they are for.
    public enum KeySlot: Sendable, Equatable {
        case password(KDF, wrap: [UInt8])
        case recipient(wrap: [UInt8])
        case device(wrap: [UInt8])

        public var typeName: String {
            switch self {
            case .password: return "password"
            case .recipient: return "p256"
            case .device: return "device"
            }
        }

        public var wrap: [UInt8] {
            switch self {
            case .password(_, let wrap), .recipient(let wrap), .device(let wrap): return wrap
            }
        }

        public static let passwordWrapBytes = FormatLimits.keyWrapBytes
        public static let deviceWrapBytes = FormatLimits.keyWrapBytes
        /// Apple ECIES of the 32-byte content key: ephemeral point (65) ‖ 32 ‖ tag (16).
        public static let recipientWrapBytes = 65 + 32 + 16

        init(reading reader: inout JSONReader) throws {
            var type: String?, kdf: KDF?, wrap: String?
            try reader.object { key, reader in
                switch key {
                case "type": try reader.fill(&type, try reader.string())
                case "kdf": try reader.fill(&kdf, try KDF(reading: &reader))
                case "wrap": try reader.fill(&wrap, try reader.string())
                default: throw reader.unknownField()
                }
            }
            let kind = try reader.required(type, "type")
            let text = try reader.required(wrap, "wrap")
            func bytes(_ length: Int) throws -> [UInt8] {
                guard let b = [UInt8](hex: text, length: length) else {
                    throw reader.failure("a \(kind) slot's wrap must be \(length) bytes of lowercase hex")
                }
                return b
            }
            switch kind {
            case "password":
                self = .password(try reader.required(kdf, "kdf"), wrap: try bytes(Self.passwordWrapBytes))
            case "p256":
                guard kdf == nil else { throw reader.failure("a p256 slot has no key derivation parameters") }
                self = .recipient(wrap: try bytes(Self.recipientWrapBytes))
            case "device":
                guard kdf == nil else { throw reader.failure("a device slot has no key derivation parameters") }
                self = .device(wrap: try bytes(Self.deviceWrapBytes))
            default:
                throw reader.failure("unknown key slot type '\(kind)'")
            }
        }

        func write(to w: inout JSONWriter) {
            w.object { w in
                if case .password(let kdf, _) = self { w.key("kdf"); kdf.write(to: &w) }
                w.key("type"); w.string(typeName)
                w.key("wrap"); w.string(wrap.hex)
            }
        }
    }

    public struct KDF: Encodable, Sendable, Equatable {
        public let algorithm: String
        public let version: Int
        public let opsLimit: UInt64
        public let memoryKiB: UInt64
        public let parallelism: Int
        public let salt: String

        public init(opsLimit: UInt64, memoryKiB: UInt64, salt: [UInt8]) {
            algorithm = "argon2id"
            version = 19
            self.opsLimit = opsLimit
            self.memoryKiB = memoryKiB
            parallelism = 1
            self.salt = salt.hex
        }

        public var saltBytes: [UInt8] { [UInt8](hex: salt, length: FormatLimits.kdfSaltBytes) ?? [] }

        init(reading reader: inout JSONReader) throws {
            var algorithm: String?, version: Int?, opsLimit: UInt64?, memoryKiB: UInt64?, parallelism: Int?, salt: String?
            try reader.object { key, reader in
                switch key {
                case "algorithm": try reader.fill(&algorithm, try reader.string())
                case "version": try reader.fill(&version, try reader.integer(Int.self))
                case "opsLimit": try reader.fill(&opsLimit, try reader.integer(UInt64.self))
                case "memoryKiB": try reader.fill(&memoryKiB, try reader.integer(UInt64.self))
                case "parallelism": try reader.fill(&parallelism, try reader.integer(Int.self))
                case "salt": try reader.fill(&salt, try reader.string())
                default: throw reader.unknownField()
                }
            }
            self.algorithm = try reader.required(algorithm, "algorithm")
            self.version = try reader.required(version, "version")
            self.opsLimit = try reader.required(opsLimit, "opsLimit")
            self.memoryKiB = try reader.required(memoryKiB, "memoryKiB")
            self.parallelism = try reader.required(parallelism, "parallelism")
            self.salt = try reader.required(salt, "salt")
        }
        func write(to w: inout JSONWriter) {
            w.object { w in
                w.key("algorithm"); w.string(algorithm)
                w.key("memoryKiB"); w.integer(memoryKiB)
                w.key("opsLimit"); w.integer(opsLimit)
                w.key("parallelism"); w.integer(parallelism)
                w.key("salt"); w.string(salt)
                w.key("version"); w.integer(version)
            }
        }

        /// FORMAT.md §2's bounds, checked before anything is derived.
        func check() throws(FormatError) {
            guard algorithm == "argon2id", version == 19, parallelism == 1 else {
                throw .invalidHeader("unsupported key derivation \(algorithm) v\(version) p\(parallelism)")
            }
            guard (1...Self.maximumOps).contains(opsLimit) else { throw .limitExceeded("Argon2id ops \(opsLimit) (at most \(Self.maximumOps))") }
            guard Self.memoryKiBRange.contains(memoryKiB) else { throw .limitExceeded("Argon2id memory \(memoryKiB) KiB (8 KiB to 1 GiB)") }
            guard saltBytes.count == FormatLimits.kdfSaltBytes else { throw .invalidHeader("salt") }
        }

        public static let maximumOps: UInt64 = 32
        public static let memoryKiBRange: ClosedRange<UInt64> = 8...(1 << 20)
    }

    /// 1 (one password or device key, `keywrap.bin`) or 2 (key slots, `header.mac`).
    public let version: Int
    public let mode: ArchiveMode
    public let archiveID: [UInt8]
    public let created: Date
    /// Version 1 portable archives only.
    public let kdf: KDF?
    /// Versions 2 and 3: the ways to the content key, in the order written.
    public let slots: [KeySlot]
    /// Version 3: the archives a restore of this one also reads (DESIGN.md §8.3), sorted;
    /// empty for a full archive and for versions 1 and 2.
    public let dependsOn: [[UInt8]]
    /// Version 3, signed archives: the Ed25519 public key whose signature `header.sig` holds.
    public let signer: [UInt8]?
    /// The bytes as stored in the archive.
    public let bytes: [UInt8]

    public static let chunkSize = FormatLimits.chunkSize
    public static let currentVersion = 3

    /// A new version 1 header (what earlier releases wrote; kept for tests and fixtures).
    public init(mode: ArchiveMode, archiveID: [UInt8], created: Date, kdf: KDF?) throws {
        precondition(archiveID.count == 16 && (kdf != nil) == (mode == .portable))
        version = 1
        self.mode = mode
        self.archiveID = archiveID
        // Whole seconds: what ISO 8601 in the file can hold, so a re-read header compares equal.
        self.created = Date(timeIntervalSince1970: created.timeIntervalSince1970.rounded(.down))
        self.kdf = kdf
        slots = []
        dependsOn = []
        signer = nil
        bytes = Self.serialized(version: 1, mode: mode, archiveID: archiveID, created: self.created, kdf: kdf, slots: [])
    }

    /// A new version 2 header with these key slots, or with `version` 3 a header that may also
    /// list dependencies and a signer; `bytes` is its canonical serialisation.
    public init(mode: ArchiveMode, archiveID: [UInt8], created: Date, slots: [KeySlot], version: Int = 2,
                dependsOn: [[UInt8]] = [], signer: [UInt8]? = nil) throws(FormatError) {
        precondition(archiveID.count == 16 && (version == 3 || (dependsOn.isEmpty && signer == nil)))
        self.version = version
        self.mode = mode
        self.archiveID = archiveID
        self.created = Date(timeIntervalSince1970: created.timeIntervalSince1970.rounded(.down))
        kdf = nil
        self.slots = slots
        self.dependsOn = dependsOn
        self.signer = signer
        bytes = Self.serialized(version: version, mode: mode, archiveID: archiveID, created: self.created, kdf: nil, slots: slots,
                                dependsOn: dependsOn, signer: signer)
        // Never write what a reader refuses (too many slots, a secure archive with a password...).
        _ = try ArchiveHeader(parsing: bytes)
    }

    /// The header's JSON (FORMAT.md §2), keys sorted.
    private static func serialized(version: Int, mode: ArchiveMode, archiveID: [UInt8], created: Date, kdf: KDF?,
                                   slots: [KeySlot], dependsOn: [[UInt8]] = [], signer: [UInt8]? = nil) -> [UInt8] {
        var writer = JSONWriter()
        writer.object { w in
            w.key("archiveId"); w.string(archiveID.hex)
            w.key("chunkSize"); w.integer(chunkSize)
            w.key("created"); w.timestamp(created)
            if version >= 3 {
                w.key("dependsOn")
                w.array { w in for id in dependsOn { w.string(id.hex) } }
            }
            w.key("format"); w.string("n11archive")
            if let kdf { w.key("kdf"); kdf.write(to: &w) }
            w.key("mode"); w.string(mode.rawValue)
            if let signer { w.key("signer"); w.string(signer.hex) }
            if version >= 2 {
                w.key("slots")
                w.array { w in for slot in slots { slot.write(to: &w) } }
            }
            w.key("version"); w.integer(version)
        }
        return writer.bytes
    }

    /// The `version` a header declares, read leniently (other fields skipped, whatever they
    /// are), if it says it is an n11archive header: FORMAT.md §2 has a reader look at it
    /// before anything else, so that a later version is reported as unsupported, not as
    /// damage, whatever new entries or fields it brings. nil if the bytes do not say.
    public static func declaredVersion(_ bytes: [UInt8]) -> Int? {
        guard bytes.count <= FormatLimits.headerBytes else { return nil }
        return try? JSONReader.read(bytes) { reader -> Int? in
            var format: String?, version: Int?
            try reader.object { key, reader in
                switch key {
                case "format": format = try reader.string()
                case "version": version = Int(try reader.integer(Int32.self))
                default: try reader.skip()
                }
            }
            return format == "n11archive" ? version : nil
        }
    }

    /// Parses and checks stored header bytes (FORMAT.md §2 rejection rules).
    public init(parsing bytes: [UInt8]) throws(FormatError) {
        guard bytes.count <= FormatLimits.headerBytes else { throw .limitExceeded("header of \(bytes.count) bytes (at most \(FormatLimits.headerBytes))") }
        let wire: Wire
        do { wire = try JSONReader.read(bytes) { reader in try Wire(reading: &reader) } }
        catch { throw .invalidHeader(error.description) }
        guard wire.format == "n11archive" else { throw .notAnArchive("format is '\(wire.format)'") }
        guard (1...3).contains(wire.version) else { throw .unsupportedVersion(wire.version) }
        guard wire.chunkSize == Self.chunkSize else { throw .invalidHeader("chunk size \(wire.chunkSize)") }
        guard let id = [UInt8](hex: wire.archiveId, length: 16) else { throw .invalidHeader("archive ID") }
        if wire.version == 1 {
            guard bytes.count <= FormatLimits.headerBytesV1 else { throw .limitExceeded("header of \(bytes.count) bytes (at most \(FormatLimits.headerBytesV1))") }
            guard wire.slots == nil else { throw .invalidHeader("key slots in a version 1 header") }
            switch (wire.mode, wire.kdf) {
            case (.portable, let kdf?): try kdf.check()
            case (.secure, nil): break
            case (.portable, nil): throw .invalidHeader("portable archive without key derivation parameters")
            case (.secure, _?): throw .invalidHeader("secure archive with key derivation parameters")
            }
        } else {
            if wire.version == 2 {
                guard bytes.count <= FormatLimits.headerBytesV2 else { throw .limitExceeded("header of \(bytes.count) bytes (at most \(FormatLimits.headerBytesV2))") }
            }
            guard wire.kdf == nil else { throw .invalidHeader("a top-level kdf in a version \(wire.version) header (it belongs in a password slot)") }
            guard let slots = wire.slots, !slots.isEmpty else { throw .invalidHeader("no key slots") }
            guard slots.count <= FormatLimits.keySlots else { throw .limitExceeded("\(slots.count) key slots (at most \(FormatLimits.keySlots))") }
            var passwords = 0
            for slot in slots {
                switch (wire.mode, slot) {
                case (.portable, .password(let kdf, _)):
                    try kdf.check()
                    passwords += 1
                case (.portable, .recipient): break
                case (.secure, .device): break
                default: throw .invalidHeader("a \(slot.typeName) slot in a \(wire.mode.rawValue) archive")
                }
            }
            guard passwords <= FormatLimits.passwordSlots else {
                throw .limitExceeded("\(passwords) password slots (at most \(FormatLimits.passwordSlots))")
            }
            if wire.mode == .secure && slots.count != 1 { throw .invalidHeader("a secure archive has exactly one device slot") }
        }
        (dependsOn, signer) = try Self.checkVersion3Fields(wire, archiveID: id)
        version = wire.version
        mode = wire.mode
        archiveID = id
        created = wire.created
        kdf = wire.kdf
        slots = wire.slots ?? []
        self.bytes = bytes
    }

    /// Version 3's `dependsOn` (required: 0…256 archive IDs, strictly increasing, not the
    /// archive's own) and `signer` (optional: an Ed25519 public key); neither in versions 1, 2.
    private static func checkVersion3Fields(_ wire: Wire, archiveID: [UInt8]) throws(FormatError) -> ([[UInt8]], [UInt8]?) {
        guard wire.version == 3 else {
            guard wire.dependsOn == nil, wire.signer == nil else { throw .invalidHeader("dependsOn or signer in a version \(wire.version) header") }
            return ([], nil)
        }
        guard let listed = wire.dependsOn else { throw .invalidHeader("no dependsOn") }
        guard listed.count <= ManifestV3.dependencies else {
            throw .limitExceeded("\(listed.count) archives depended on (at most \(ManifestV3.dependencies))")
        }
        var dependsOn: [[UInt8]] = []
        for text in listed {
            guard let id = [UInt8](hex: text, length: 16) else { throw .invalidHeader("a dependsOn entry is not an archive ID") }
            guard id != archiveID else { throw .invalidHeader("the archive depends on itself") }
            if let last = dependsOn.last, !last.lexicographicallyPrecedes(id) { throw .invalidHeader("dependsOn is not sorted or repeats an ID") }
            dependsOn.append(id)
        }
        var signer: [UInt8]? = nil
        if let text = wire.signer {
            guard let key = [UInt8](hex: text, length: FormatLimits.signerKeyBytes) else { throw .invalidHeader("signer is not an Ed25519 public key") }
            signer = key
        }
        return (dependsOn, signer)
    }

    /// The KDF parameters a password would be tried with, for bounds checks and messages.
    public var passwordKDFs: [KDF] {
        if let kdf { return [kdf] }
        return slots.compactMap { if case .password(let kdf, _) = $0 { return kdf } else { return nil } }
    }

    public var recipientSlotCount: Int { slots.filter { if case .recipient = $0 { return true } else { return false } }.count }

    /// The fields of FORMAT.md §2 as read, before the checks above.
    private struct Wire {
        let format: String
        let version: Int
        let mode: ArchiveMode
        let archiveId: String
        let created: Date
        let chunkSize: Int
        let kdf: KDF?
        let slots: [KeySlot]?
        let dependsOn: [String]?
        let signer: String?

        init(reading reader: inout JSONReader) throws {
            var format: String?, version: Int?, mode: ArchiveMode?, archiveId: String?, created: Date?, chunkSize: Int?
            var kdf: KDF?, slots: [KeySlot]?, dependsOn: [String]?, signer: String?
            try reader.object { key, reader in
                switch key {
                case "format": try reader.fill(&format, try reader.string())
                case "version": try reader.fill(&version, try reader.integer(Int.self))
                case "mode": try reader.fill(&mode, try reader.string(ArchiveMode.self))
                case "archiveId": try reader.fill(&archiveId, try reader.string())
                case "created": try reader.fill(&created, try reader.timestamp())
                case "chunkSize": try reader.fill(&chunkSize, try reader.integer(Int.self))
                case "kdf": try reader.fill(&kdf, try KDF(reading: &reader))
                case "slots":
                    var list: [KeySlot] = []
                    try reader.array { reader in
                        guard list.count < FormatLimits.keySlots else {
                            throw reader.failure("more than \(FormatLimits.keySlots) key slots")
                        }
                        list.append(try KeySlot(reading: &reader))
                    }
                    try reader.fill(&slots, list)
                case "dependsOn":
                    var list: [String] = []
                    try reader.array { reader in
                        guard list.count < ManifestV3.dependencies else {
                            throw reader.failure("more than \(ManifestV3.dependencies) archives depended on")
                        }
                        list.append(try reader.string())
                    }
                    try reader.fill(&dependsOn, list)
                case "signer": try reader.fill(&signer, try reader.string())
                default: throw reader.unknownField()
                }
            }
            self.format = try reader.required(format, "format")
            self.version = try reader.required(version, "version")
            self.mode = try reader.required(mode, "mode")
            self.archiveId = try reader.required(archiveId, "archiveId")
            self.created = try reader.required(created, "created")
            self.chunkSize = try reader.required(chunkSize, "chunkSize")
            self.kdf = kdf
            self.slots = slots
            self.dependsOn = dependsOn
            self.signer = signer
        }
    }

    public var archiveIDHex: String { archiveID.hex }
}

/// The two archive modes of seed 003 (FORMAT.md §2).
public enum ArchiveMode: String, CaseIterable, Codable, Sendable { case portable, secure }
