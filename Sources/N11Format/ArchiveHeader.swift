import Foundation
import N11System

/// `header.json` (FORMAT.md §2): everything a reader needs before it has a key. Its exact
/// bytes are authenticated as the key wrap's associated data, so they are kept, never
/// re-serialised.
public struct ArchiveHeader: Sendable, Equatable {
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
        bytes = Self.serialized(mode: mode, archiveID: archiveID, created: self.created, kdf: kdf)
    }

    /// The header's JSON (FORMAT.md §2), keys sorted.
    private static func serialized(mode: ArchiveMode, archiveID: [UInt8], created: Date, kdf: KDF?) -> [UInt8] {
        var writer = JSONWriter()
        writer.object { w in
            w.key("archiveId"); w.string(archiveID.hex)
            w.key("chunkSize"); w.integer(chunkSize)
            w.key("created"); w.timestamp(created)
            w.key("format"); w.string("n11archive")
            if let kdf {
                w.key("kdf")
                w.object { w in
                    w.key("algorithm"); w.string(kdf.algorithm)
                    w.key("memoryKiB"); w.integer(kdf.memoryKiB)
                    w.key("opsLimit"); w.integer(kdf.opsLimit)
                    w.key("parallelism"); w.integer(kdf.parallelism)
                    w.key("salt"); w.string(kdf.salt)
                    w.key("version"); w.integer(kdf.version)
                }
            }
            w.key("mode"); w.string(mode.rawValue)
            w.key("version"); w.integer(1)
        }
        return writer.bytes
    }

    /// Parses and checks stored header bytes (FORMAT.md §2 rejection rules).
    public init(parsing bytes: [UInt8]) throws(FormatError) {
        guard bytes.count <= FormatLimits.headerBytes else { throw .limitExceeded("header of \(bytes.count) bytes (at most \(FormatLimits.headerBytes))") }
        let wire: Wire
        do { wire = try JSONReader.read(bytes) { reader in try Wire(reading: &reader) } }
        catch { throw .invalidHeader(error.description) }
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

    /// The fields of FORMAT.md §2 as read, before the checks above.
    private struct Wire {
        let format: String
        let version: Int
        let mode: ArchiveMode
        let archiveId: String
        let created: Date
        let chunkSize: Int
        let kdf: KDF?

        init(reading reader: inout JSONReader) throws {
            var format: String?, version: Int?, mode: ArchiveMode?, archiveId: String?, created: Date?, chunkSize: Int?
            var kdf: KDF?
            try reader.object { key, reader in
                switch key {
                case "format": try reader.fill(&format, try reader.string())
                case "version": try reader.fill(&version, try reader.integer(Int.self))
                case "mode": try reader.fill(&mode, try reader.string(ArchiveMode.self))
                case "archiveId": try reader.fill(&archiveId, try reader.string())
                case "created": try reader.fill(&created, try reader.timestamp())
                case "chunkSize": try reader.fill(&chunkSize, try reader.integer(Int.self))
                case "kdf": try reader.fill(&kdf, try KDF(reading: &reader))
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
        }
    }

    public var archiveIDHex: String { archiveID.hex }
}

/// The two archive modes of seed 003 (FORMAT.md §2).
public enum ArchiveMode: String, CaseIterable, Codable, Sendable { case portable, secure }
