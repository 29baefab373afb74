import Foundation
import Testing
import N11Format

/// Version 3's binary manifest pages and root (DESIGN.md §8.2): they round-trip, and every
/// rule a reader enforces refuses a page that breaks it.
@Suite("Version 3 manifest pages and root: encoding and the reader's rules")
struct ManifestPagesTests {
    static func id(_ n: Int) -> [UInt8] { (0..<16).map { UInt8(truncatingIfNeeded: n >> (8 * (15 - $0))) } }

    static func record(_ n: Int, compartment: Compartment = .vault, name: String = "IMG_0001.jpg", holder: Int = 0,
                       size: Int64 = 2_000_000, offset: Int64 = 0) -> ManifestRecord {
        ManifestRecord(id: id(n), kind: n % 2 == 0 ? .photo : .note, compartment: compartment, name: name,
                       created: 1_795_000_000_123, expires: compartment == .fade ? 1_796_000_000_000 : nil,
                       size: size, sha256: [UInt8](repeating: UInt8(n & 0xFF), count: 32),
                       location: ItemLocation(holder: holder, pack: UInt32(n / 100), offset: offset))
    }

    func parse(_ bytes: [UInt8], mode: ArchiveMode = .portable, dependencies: Int = 2) throws(FormatError) -> [ManifestRecord] {
        try ManifestPage.parse(bytes, mode: mode, dependencies: dependencies, what: "page 0")
    }

    @Test("a page round-trips every field, with holders, packs, offsets, a fade expiry and a non-ASCII name")
    func pageRoundTrip() throws {
        let records = [Self.record(1), Self.record(2, compartment: .fade, name: "Ünïcode note ✓", holder: 2, offset: 1 << 40),
                       Self.record(300, compartment: .backup, holder: 1, size: 0)]
        let bytes = ManifestPage.serialized(records)
        #expect(try parse(bytes) == records)
        #expect(ManifestRecord.idString(Self.id(1)) == "00000000-0000-0000-0000-000000000001")
        #expect(ManifestRecord.idBytes("00000000-0000-0000-0000-00000000012C") == Self.id(300))
        #expect(ManifestRecord.idBytes("00000000-0000-0000-0000-00000000012c") == nil, "lower case is not canonical")
        let every: [UInt8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10]
        #expect(ManifestRecord.idString(every) == "01234567-89AB-CDEF-FEDC-BA9876543210")
        #expect(ManifestRecord.idBytes("01234567-89AB-CDEF-FEDC-BA9876543210") == every)
        for _ in 0..<100 {
            let random = (0..<16).map { _ in UInt8.random(in: 0...255) }
            #expect(ManifestRecord.idBytes(ManifestRecord.idString(random)) == random)
        }
        #expect(ManifestRecord.idBytes("0123456789AB-CDEF-FEDC-BA9876543210") == nil, "dashes out of place")
        // A typical photo record is well under the 100 bytes an item that issue 27 allows.
        #expect(ManifestPage.serialized([Self.record(7)]).count - ManifestV3.pageMagic.count - 1 < 100)
    }

    @Test("LEB128: the shortest form only, at most 63 bits, within each field's bound")
    func strictIntegers() throws {
        var w = BinaryWriter()
        for value: UInt64 in [0, 1, 127, 128, 300, 1 << 35, UInt64(Int64.max)] { w.integer(value) }
        var r = BinaryReader(w.bytes, what: "t")
        for value: UInt64 in [0, 1, 127, 128, 300, 1 << 35, UInt64(Int64.max)] {
            #expect(try r.integer(atMost: UInt64(Int64.max), "v") == value)
        }
        try r.end()
        for bad: [UInt8] in [[0x80, 0x00], [0xFF, 0x80, 0x00], [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01], [0x80]] {
            var r = BinaryReader(bad, what: "t")
            #expect(throws: FormatError.self, "\(bad)") { _ = try r.integer(atMost: UInt64(Int64.max), "v") }
        }
        var bounded = BinaryReader([0xAC, 0x02], what: "t")   // 300
        #expect(throws: FormatError.self) { _ = try bounded.integer(atMost: 299, "v") }
    }

    /// The page of `records`, with the byte at `offset` from the end of record `index`'s id replaced.
    func edited(_ edit: (inout [UInt8]) -> Void) -> [UInt8] {
        var bytes = ManifestPage.serialized([Self.record(1), Self.record(2)])
        edit(&bytes)
        return bytes
    }

    @Test("a reader refuses: another magic, no items, IDs out of order or repeated, bytes after the end, a page cut short")
    func pageStructure() throws {
        let good = ManifestPage.serialized([Self.record(1), Self.record(2)])
        #expect(throws: FormatError.self) { _ = try parse(edited { $0[0] = UInt8(ascii: "X") }) }
        #expect(throws: FormatError.self) { _ = try parse(ManifestV3.pageMagic + [0]) }
        #expect(throws: FormatError.self) { _ = try parse(ManifestPage.serialized([Self.record(2), Self.record(1)])) }
        #expect(throws: FormatError.self) { _ = try parse(ManifestPage.serialized([Self.record(2), Self.record(2)])) }
        #expect(throws: FormatError.self) { _ = try parse(good + [0]) }
        #expect(throws: FormatError.self) { _ = try parse(Array(good.dropLast())) }
        #expect(throws: FormatError.self) { _ = try parse(ManifestV3.pageMagic + [0x81, 0x80, 0x01]) }   // 16,385 items
    }

    @Test("a reader refuses a record's bad flags, an expiry on a non-fade item or none on a fade one, a bad name, a holder past dependsOn")
    func recordRules() throws {
        let flagsAt = ManifestV3.pageMagic.count + 1 + 16
        #expect(throws: FormatError.self) { _ = try parse(edited { $0[flagsAt] |= 0x10 }) }
        #expect(throws: FormatError.self) { _ = try parse(edited { $0[flagsAt] |= 0x06 }) }   // compartment 3
        #expect(throws: FormatError.self) { _ = try parse(edited { $0[flagsAt] |= 0x02 }) }   // fade without an expiry
        #expect(throws: FormatError.self) { _ = try parse(ManifestPage.serialized([Self.record(1, name: "a/b")])) }
        #expect(throws: FormatError.self) { _ = try parse(ManifestPage.serialized([Self.record(1, name: "a\u{0}b")])) }
        #expect(throws: FormatError.self) { _ = try parse(ManifestPage.serialized([Self.record(1, name: "")])) }
        #expect(throws: FormatError.self) { _ = try parse(ManifestPage.serialized([Self.record(1, name: String(repeating: "x", count: 256))])) }
        #expect(throws: FormatError.self) { _ = try parse(ManifestPage.serialized([Self.record(1, holder: 3)]), dependencies: 2) }
        #expect(throws: FormatError.self) { _ = try parse(ManifestPage.serialized([Self.record(1, size: FormatLimits.itemSize + 1)])) }
        #expect(throws: FormatError.self) { _ = try parse(ManifestPage.serialized([Self.record(1, offset: ManifestV3.packPayload - 10)])) }
        // An invalid UTF-8 name: the name's bytes are the last ones before holder, pack and offset.
        var bytes = ManifestPage.serialized([Self.record(1, name: "ab")])
        bytes[bytes.count - 5] = 0xFF
        #expect(throws: FormatError.self) { _ = try parse(bytes) }
    }

    static func descriptor(_ n: Int, count: Int = 10, holder: Int = 0, page: Int = 0) -> PageDescriptor {
        PageDescriptor(firstID: id(n), itemCount: count, holder: holder, page: page, plaintextLength: 1000,
                       sha256: [UInt8](repeating: 7, count: 32))
    }

    @Test("a root round-trips as a page list (with a secure archive's key IDs) and as 'the same as'; a reader checks its rules")
    func root() throws {
        let list = ManifestRoot.pages(.init(vaultKeys: [.vault: [UInt8](repeating: 1, count: 16), .fade: [UInt8](repeating: 2, count: 16)],
                                            itemCount: 20, plaintextBytes: 12345,
                                            pages: [Self.descriptor(1), Self.descriptor(50, holder: 1, page: 3)]))
        #expect(try ManifestRoot(parsing: list.serialized(), mode: .secure, dependencies: 1) == list)
        let same = ManifestRoot.sameAs(holder: 1, rootSHA256: [UInt8](repeating: 9, count: 32))
        #expect(try ManifestRoot(parsing: same.serialized(), mode: .portable, dependencies: 1) == same)

        #expect(throws: FormatError.self, "vault key IDs in a portable archive") {
            _ = try ManifestRoot(parsing: list.serialized(), mode: .portable, dependencies: 1)
        }
        #expect(throws: FormatError.self, "a page held by an archive that is not a dependency") {
            _ = try ManifestRoot(parsing: list.serialized(), mode: .secure, dependencies: 0)
        }
        #expect(throws: FormatError.self, "the same as itself") {
            _ = try ManifestRoot(parsing: ManifestRoot.sameAs(holder: 0, rootSHA256: [UInt8](repeating: 9, count: 32)).serialized(), mode: .portable, dependencies: 1)
        }
        let unordered = ManifestRoot.pages(.init(vaultKeys: [:], itemCount: 20, plaintextBytes: 0, pages: [Self.descriptor(50), Self.descriptor(1)]))
        #expect(throws: FormatError.self) { _ = try ManifestRoot(parsing: unordered.serialized(), mode: .portable, dependencies: 0) }
        let miscounted = ManifestRoot.pages(.init(vaultKeys: [:], itemCount: 21, plaintextBytes: 0, pages: [Self.descriptor(1), Self.descriptor(50)]))
        #expect(throws: FormatError.self) { _ = try ManifestRoot(parsing: miscounted.serialized(), mode: .portable, dependencies: 0) }
        #expect(throws: FormatError.self) { _ = try ManifestRoot(parsing: same.serialized() + [0], mode: .portable, dependencies: 1) }
        let empty = ManifestRoot.pages(.init(vaultKeys: [:], itemCount: 0, plaintextBytes: 0, pages: []))
        #expect(try ManifestRoot(parsing: empty.serialized(), mode: .portable, dependencies: 0) == empty, "an archive of no items")
    }
}
