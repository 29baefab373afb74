import Foundation
import Testing
import N11Format
import N11TestSupport
@testable import N11Vault

/// The catalogue reads each metadata record with `MetadataRecordDecoding` first; it must give
/// what `JSONDecoder` gives, take the records the vault writes, and decline the rest.
@Suite("Metadata records: the direct reader agrees with JSONDecoder or declines")
struct MetadataRecordTests {
    static func record(name: String, fade: Bool = false, size: Int64 = 2048, n: Int = 1) -> ItemMetadata {
        ItemMetadata(id: String(format: "%08X-1111-4222-8333-%012X", n, n * 31), kind: n % 2 == 0 ? .photo : .note,
                     compartment: fade ? .fade : (n % 3 == 0 ? .backup : .vault), name: name,
                     created: Date(timeIntervalSince1970: 1_700_000_000.123 + Double(n)),
                     expires: fade ? Date(timeIntervalSince1970: 1_800_000_000.5) : nil, size: size,
                     contentTag: String(repeating: "0f", count: 16), sha256: String(repeating: "e3", count: 32))
    }

    static func foundation(_ bytes: [UInt8]) -> ItemMetadata? {
        try? ItemMetadata.decoder.decode(ItemMetadata.self, from: Data(bytes))
    }

    @Test("records as the vault writes them are read directly and equal JSONDecoder's reading")
    func writtenRecords() throws {
        let names = ["IMG_0001.jpg", "Ünïcödé ✓ 😀", "日本語", "a b", String(repeating: "z", count: 255)]
        for n in 0..<200 {
            let item = Self.record(name: names[n % names.count], fade: n % 4 == 0,
                                   size: [0, 1, 2048, Int64.max][n % 4], n: n)
            let bytes = try Array(ItemMetadata.encoder.encode(item))
            let direct = try #require(MetadataRecordDecoding.metadata(from: bytes), "declined \(String(decoding: bytes, as: UTF8.self))")
            #expect(direct == item)
            #expect(direct == Self.foundation(bytes))
            #expect(direct.expires == item.expires && direct.created == item.created)
        }
    }

    @Test("names JSON escapes fall back to JSONDecoder with the same result")
    func escapedNames() throws {
        for name in [#"say "hi""#, #"a\b"#, "line\nbreak", "nul-free\u{1F}"] {
            let item = Self.record(name: name)
            let bytes = try Array(ItemMetadata.encoder.encode(item))
            #expect(MetadataRecordDecoding.metadata(from: bytes) == nil, "\(name)")
            #expect(ItemMetadata.decode(bytes) == item, "\(name)")
        }
    }

    @Test("edited records: the direct reader either agrees with JSONDecoder or declines",
          arguments: [
            #""size":2048,"future":"field""#,   // unknown key: ignored by both
            #""size":2048,"expires":null"#,     // explicit null expiry: nil for both
            #""size":2048.0"#,                  // a fraction
            #""size":"2048""#,                  // wrong type: both refuse
            #""size":2048,"size":1"#,           // repeated
            #""size":-1"#,                      // negative: decodes (the vault checks sizes elsewhere)
            #""size":2048}garbage"#,            // trailing bytes
          ])
    func edited(_ replacement: String) throws {
        let text = String(decoding: try ItemMetadata.encoder.encode(Self.record(name: "n")), as: UTF8.self)
        let changed = Array(text.replacingOccurrences(of: #""size":2048"#, with: replacement).replacingOccurrences(of: "}garbage}", with: "}garbage").utf8)
        let foundation = Self.foundation(changed)
        if let direct = MetadataRecordDecoding.metadata(from: changed) {
            #expect(direct == foundation, "\(replacement)")
        }
        #expect(ItemMetadata.decode(changed) == foundation, "\(replacement)")
    }

    @Test("a missing field or an unknown kind or compartment is declined and refused")
    func refused() throws {
        let text = String(decoding: try ItemMetadata.encoder.encode(Self.record(name: "n")), as: UTF8.self)
        for (old, new) in [(#""kind":"note","#, ""), (#""kind":"note""#, #""kind":"video""#),
                           (#""compartment":"vault""#, #""compartment":"vaults""#), (#""sha256":"#, #""sha257":"#)] {
            let changed = Array(text.replacingOccurrences(of: old, with: new).utf8)
            #expect(changed != Array(text.utf8), "fixture lacks \(old)")
            #expect(MetadataRecordDecoding.metadata(from: changed) == nil, "\(new)")
            #expect(ItemMetadata.decode(changed) == nil, "\(new)")
        }
    }

    @Test("Meta/ files named by a canonical ID are records (damaged if they do not open); other names are stray files")
    func recordNames() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            let item = try vault.add(note("kept"))
            let sealed = try #require(FileManager.default.contents(atPath: metadataPath(of: item, in: vault)))
            let garbageID = "00000000-0000-4000-8000-000000000000"
            // Another spelling of the real record's ID, and forms UUID(uuidString:) also takes.
            let stray = [item.id.lowercased(), "+" + item.id.dropFirst(), String(item.id.dropLast(12)) + "0x" + item.id.suffix(10)]
            #expect(FileManager.default.createFile(atPath: dir + "/vault/Meta/\(garbageID).n11meta", contents: Data([1, 2, 3])))
            for name in stray {
                #expect(FileManager.default.createFile(atPath: dir + "/vault/Meta/\(name).n11meta", contents: sealed), "\(name)")
            }
            let reopened = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: false)
            #expect(try reopened.items().map(\.id) == [item.id])
            #expect(try reopened.damagedItemIDs() == [garbageID])
        }
    }
}
