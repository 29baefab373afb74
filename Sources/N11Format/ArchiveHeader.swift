import Foundation
import N11System

/// `header.json` (FORMAT.md §2): everything a reader needs before it has a key. Its exact
/// bytes are authenticated as the key wrap's associated data, so they are kept, never
/// re-serialised.
public struct ArchiveHeader: Sendable, Equatable {
    public struct KDF: Codable, Sendable, Equatable {
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

        static let fields: Set<String> = ["algorithm", "version", "opsLimit", "memoryKiB", "parallelism", "salt"]
        public static let maximumOps: UInt64 = 32
        public static let memoryKiBRange: ClosedRange<UInt64> = 8...(1 << 20)
    }

    public let mode: ArchiveMode
    public let archiveID: [UInt8]
    public let created: Date
    public let kdf: KDF?
    /// The bytes as stored in the archive.
    public let bytes: [UInt8]

    public static let chunkSize = FormatLimits.chunkSize

    /// A new header; `bytes` is its canonical serialisation.
    public init(mode: ArchiveMode, archiveID: [UInt8], created: Date, kdf: KDF?) throws {
        precondition(archiveID.count == 16 && (kdf != nil) == (mode == .portable))
        self.mode = mode
        self.archiveID = archiveID
        // Whole seconds: what ISO 8601 in the file can hold, so a re-read header compares equal.
        self.created = Date(timeIntervalSince1970: created.timeIntervalSince1970.rounded(.down))
        self.kdf = kdf
        let wire = Wire(format: "n11archive", version: 1, mode: mode, archiveId: archiveID.hex,
                        created: self.created, chunkSize: Self.chunkSize, kdf: kdf)
        bytes = Array(try JSONCoding.encoder().encode(wire))
    }

    /// Parses and checks stored header bytes (FORMAT.md §2 rejection rules).
    public init(parsing bytes: [UInt8]) throws(FormatError) {
        guard bytes.count <= FormatLimits.headerBytes else { throw .limitExceeded("header of \(bytes.count) bytes (at most \(FormatLimits.headerBytes))") }
        if let problem = StrictJSONValidator.problem(in: bytes) { throw .invalidHeader(problem) }
        let wire: Wire
        do { wire = try JSONCoding.decoder().decode(Wire.self, from: Data(bytes)) }
        catch { throw .invalidHeader(JSONCoding.reason(error)) }
        guard wire.format == "n11archive" else { throw .notAnArchive("format is '\(wire.format)'") }
        guard wire.version == 1 else { throw .unsupportedVersion(wire.version) }
        guard wire.chunkSize == Self.chunkSize else { throw .invalidHeader("chunk size \(wire.chunkSize)") }
        guard let id = [UInt8](hex: wire.archiveId, length: 16) else { throw .invalidHeader("archive ID") }
        switch (wire.mode, wire.kdf) {
        case (.portable, let kdf?):
            guard kdf.algorithm == "argon2id", kdf.version == 19, kdf.parallelism == 1 else {
                throw .invalidHeader("unsupported key derivation \(kdf.algorithm) v\(kdf.version) p\(kdf.parallelism)")
            }
            guard (1...KDF.maximumOps).contains(kdf.opsLimit) else { throw .limitExceeded("Argon2id ops \(kdf.opsLimit) (at most \(KDF.maximumOps))") }
            guard KDF.memoryKiBRange.contains(kdf.memoryKiB) else { throw .limitExceeded("Argon2id memory \(kdf.memoryKiB) KiB (8 KiB to 1 GiB)") }
            guard kdf.saltBytes.count == FormatLimits.kdfSaltBytes else { throw .invalidHeader("salt") }
        case (.secure, nil): break
        case (.portable, nil): throw .invalidHeader("portable archive without key derivation parameters")
        case (.secure, _?): throw .invalidHeader("secure archive with key derivation parameters")
        }
        mode = wire.mode
        archiveID = id
        created = wire.created
        kdf = wire.kdf
        self.bytes = bytes
    }

    /// The JSON shape of FORMAT.md §2.
    struct Wire: Codable {
        let format: String
        let version: Int
        let mode: ArchiveMode
        let archiveId: String
        let created: Date
        let chunkSize: Int
        let kdf: KDF?

        static let fields: Set<String> = ["format", "version", "mode", "archiveId", "created", "chunkSize", "kdf"]

        init(format: String, version: Int, mode: ArchiveMode, archiveId: String, created: Date, chunkSize: Int, kdf: KDF?) {
            self.format = format; self.version = version; self.mode = mode
            self.archiveId = archiveId; self.created = created; self.chunkSize = chunkSize; self.kdf = kdf
        }

        init(from decoder: any Decoder) throws {
            try decoder.requireOnlyKeys(Self.fields, in: "header")
            let c = try decoder.container(keyedBy: CodingKeys.self)
            format = try c.decode(String.self, forKey: .format)
            version = try c.decode(Int.self, forKey: .version)
            mode = try c.decode(ArchiveMode.self, forKey: .mode)
            archiveId = try c.decode(String.self, forKey: .archiveId)
            created = try c.decode(Date.self, forKey: .created)
            chunkSize = try c.decode(Int.self, forKey: .chunkSize)
            if c.contains(.kdf) {
                let nested = try c.superDecoder(forKey: .kdf)
                try nested.requireOnlyKeys(KDF.fields, in: "kdf")
                kdf = try KDF(from: nested)
            } else { kdf = nil }
        }
    }

    public var archiveIDHex: String { archiveID.hex }
}

/// The two archive modes of seed 003 (FORMAT.md §2).
public enum ArchiveMode: String, CaseIterable, Codable, Sendable { case portable, secure }
