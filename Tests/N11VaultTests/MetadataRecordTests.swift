import Foundation
import Testing
import N11Format
import N11System
import N11TestSupport
@testable import N11Vault

/// Metadata records are read by the format's one strict JSON reader: what the vault writes
/// reads back exactly, escapes included; every edit has one stated verdict.
@Suite("Metadata records: written and read by one strict JSON path")
struct MetadataRecordTests {
    static func record(name: String, fade: Bool = false, size: Int64 = 2048, n: Int = 1) -> ItemMetadata {
        ItemMetadata(id: String(format: "%08X-1111-4222-8333-%012X", n, n * 31), kind: n % 2 == 0 ? .photo : .note,
                     compartment: fade ? .fade : (n % 3 == 0 ? .backup : .vault), name: name,
                     created: Date(timeIntervalSince1970: 1_700_000_000.123 + Double(n)),
                     expires: fade ? Date(timeIntervalSince1970: 1_800_000_000.5) : nil, size: size,
                     contentTag: String(repeating: "0f", count: 16), sha256: String(repeating: "e3", count: 32))
    }

    @Test("records as the vault writes them read back field for field, times to the millisecond")
    func writtenRecords() throws {
        let names = ["IMG_0001.jpg", "Ünïcödé ✓ 😀", "日本語", "a b", String(repeating: "z", count: 255)]
        for n in 0..<200 {
            let item = Self.record(name: names[n % names.count], fade: n % 4 == 0,
                                   size: [0, 1, 2048, Int64.max][n % 4], n: n)
            let read = try ItemMetadata.parse(item.serialized())
            #expect(read == item)
            #expect(read.expires == item.expires && read.created == item.created)
        }
    }

    @Test("names that JSON must escape are escaped by the writer and read back exactly")
    func escapedNames() throws {
        for name in [#"say "hi""#, #"a\b"#, "line\nbreak", "nul-free\u{1F}", "tab\tand\u{8}\u{C}\r"] {
            let item = Self.record(name: name)
            let bytes = item.serialized()
            #expect(!bytes.contains(where: { $0 < 0x20 }), "no raw control character in \(name)")
            #expect(try ItemMetadata.parse(bytes) == item, "\(name)")
        }
    }

    @Test("edited records: each edit has one verdict",
          arguments: [
            (#""size":2048,"future":"field""#, 2048 as Int64?),   // unknown key: skipped (a later version's field)
            (#""size":2048,"expires":null"#, 2048),               // explicit null expiry: none
            (#""size":-1"#, -1),                                  // negative: read (the vault checks sizes elsewhere)
            (#""size":2048.0"#, nil),                             // a fraction: refused
            (#""size":2e3"#, nil),                                // an exponent: refused
            (#""size":02048"#, nil),                              // a leading zero: refused
            (#""size":"2048""#, nil),                             // wrong type: refused
            (#""size":2048,"size":1"#, nil),                      // repeated: refused
            (#""size":2048,"s\u0069ze":1"#, nil),                 // repeated under an escape: refused
            (#""size":2048,"future":1,"future":2"#, nil),         // a repeated unknown key: refused
            (#""size":2048}garbage"#, nil),                       // trailing bytes: refused
            (#""size":99999999999999999999"#, nil),               // beyond Int64: refused
          ] as [(String, Int64?)])
    func edited(_ replacement: String, _ size: Int64?) throws {
        let text = String(decoding: Self.record(name: "n").serialized(), as: UTF8.self)
        #expect(text.contains(#""size":2048"#))
        let changed = Array(text.replacingOccurrences(of: #""size":2048"#, with: replacement)
            .replacingOccurrences(of: "}garbage}", with: "}garbage").utf8)
        #expect(ItemMetadata.decode(changed)?.size == size, "\(replacement)")
    }

    @Test("a byte-order mark, a missing field or an unknown kind or compartment is refused, naming the field")
    func refused() throws {
        let text = String(decoding: Self.record(name: "n").serialized(), as: UTF8.self)
        #expect(ItemMetadata.decode([0xEF, 0xBB, 0xBF] + Array(text.utf8)) == nil)
        for (old, new, field) in [(#""kind":"note","#, "", "kind"), (#""kind":"note""#, #""kind":"video""#, "kind"),
                                  (#""compartment":"vault""#, #""compartment":"vaults""#, "compartment"),
                                  (#""sha256":"#, #""sha257":"#, "sha256")] {
            let changed = Array(text.replacingOccurrences(of: old, with: new).utf8)
            #expect(changed != Array(text.utf8), "fixture lacks \(old)")
            #expect(ItemMetadata.decode(changed) == nil, "\(new)")
            #expect(throws: JSONReader.Failure.self, "\(new)") { try ItemMetadata.parse(changed) }
            do { _ = try ItemMetadata.parse(changed) } catch { #expect(error.field == field, "\(new): \(error)") }
        }
    }

    @Test("a migration killed after its commit point, at each part of step 3: the next writer finishes it and writes the Meta file",
          arguments: ["records kept", "records gone", "Meta/ gone"])
    func migrationFinishedAfterCrash(cut: String) throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let vault = dir + "/vault"
            let items = try { () throws -> [ItemMetadata] in
                let writer = try Vault.open(at: vault, keyStore: store, forWriting: true)
                return [try writer.add(note("a")), try writer.add(note("b"))]
            }()
            try TestCatalogue.downgradeToVersion1(vault)
            try MetaDirectory.migrate(vaultPath: vault)   // steps 1 and 2 only, as if killed right after
            #expect(try TestCatalogue.pending(in: vault) == ["finish-migration"])
            if cut != "records kept" { for item in items { try FileSystem.removeFile(vault + "/Meta/\(item.id).n11meta") } }
            if cut == "Meta/ gone" { try FileSystem.removeEmptyDirectory(vault + "/Meta") }

            let reader = try Vault.open(at: vault, keyStore: store, forWriting: false)
            #expect(Set(try reader.items().map(\.id)) == Set(items.map(\.id)), "a reader reads the catalogue")
            let writer = try Vault.open(at: vault, keyStore: store, forWriting: true)
            #expect(Set(try writer.items().map(\.id)) == Set(items.map(\.id)))
            #expect(try TestCatalogue.pending(in: vault).isEmpty)
            let status = try #require(try FileStatus.of(vault + "/Meta"))
            #expect(status.kind == .regular, "the Meta file stands where Meta/ was")
        }
    }

    @Test("v1 Meta/ files named by a canonical ID are records (damaged if they do not open), read as they are and migrated by the first writer; other names are stray files, left alone")
    func recordNames() throws {
        try withTemporaryDirectory { dir in
            let (_, store) = try makeHome(in: dir)
            let item = try { () throws -> ItemMetadata in
                let vault = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
                return try vault.add(note("kept"))
            }()
            let sealed = Data(try #require(try TestCatalogue.record(id: item.id, in: dir + "/vault")))
            try TestCatalogue.downgradeToVersion1(dir + "/vault")
            let garbageID = "00000000-0000-4000-8000-000000000000"
            // Another spelling of the real record's ID, and forms UUID(uuidString:) also takes.
            let stray = [item.id.lowercased(), "+" + item.id.dropFirst(), String(item.id.dropLast(12)) + "0x" + item.id.suffix(10)]
            #expect(FileManager.default.createFile(atPath: dir + "/vault/Meta/\(garbageID).n11meta", contents: Data([1, 2, 3])))
            for name in stray {
                #expect(FileManager.default.createFile(atPath: dir + "/vault/Meta/\(name).n11meta", contents: sealed), "\(name)")
            }
            let reader = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: false)
            #expect(try reader.items().map(\.id) == [item.id])
            #expect(try reader.damagedItemIDs() == [garbageID])
            #expect(!exists(TestCatalogue.path(dir + "/vault")), "a reader does not migrate")

            let writer = try Vault.open(at: dir + "/vault", keyStore: store, forWriting: true)
            #expect(try writer.items().map(\.id) == [item.id])
            #expect(try writer.damagedItemIDs() == [garbageID])
            #expect(try TestCatalogue.records(in: dir + "/vault").map(\.id) == [garbageID, item.id])
            #expect(try TestCatalogue.record(id: garbageID, in: dir + "/vault") == [1, 2, 3], "copied byte for byte")
            // The stray files are not records: they stay, and so does Meta/ around them.
            #expect(Set(listing(of: dir + "/vault/Meta")) == Set(stray.map { "\($0).n11meta" }))
        }
    }
}
