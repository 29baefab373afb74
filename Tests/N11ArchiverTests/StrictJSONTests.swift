import Foundation
import Testing
@testable import N11Format

/// The format's documents have one JSON reader and one writer (`JSONReader`, `JSONWriter`):
/// what create writes reads back exactly, and every input that parsers could disagree about
/// is refused with the field it is in.
@Suite("Strict JSON: one reader and one writer for the manifest")
struct StrictJSONTests {
    static let header = try! ArchiveHeader(mode: .portable, archiveID: Array(0..<16), created: Date(timeIntervalSince1970: 1_795_000_000.25),
                                           kdf: .init(opsLimit: 1, memoryKiB: 8192, salt: Array(repeating: 7, count: 16)))

    static func item(_ n: Int, name: String, fade: Bool = false, size: Int64 = 2048) -> Manifest.Item {
        let id = String(format: "%08X-0000-4000-8000-%012X", n, n * 7919)
        return Manifest.Item(id: id, kind: n % 2 == 0 ? .photo : .note, compartment: fade ? .fade : .vault, name: name,
                             created: Date(timeIntervalSince1970: 1_700_000_000 + Double(n) * 1.001),
                             expires: fade ? Date(timeIntervalSince1970: 1_900_000_000.5) : nil, size: size,
                             sha256: String(repeating: "ab", count: 32), mode: .portable)
    }

    @Test("manifests as create writes them read back field for field")
    func writtenManifests() throws {
        var generator = SystemRandomNumberGenerator()
        let names = ["IMG_0001.jpg", "note", "Ünïcödé ✓ 😀.txt", "a b  c", "日本語のメモ", "x", String(repeating: "n", count: 255),
                     #"quote " inside"#, #"back\slash"#, "tab\there", "bell\u{07}", "del\u{7F}ok", "line sep \u{2028}"]
        var items: [Manifest.Item] = []
        for n in 0..<300 {
            items.append(Self.item(n, name: names[n % names.count], fade: n % 5 == 0,
                                   size: [0, 1, 2048, Int64(generator.next() % (1 << 40)), FormatLimits.itemSize][n % 5]))
        }
        let manifest = Manifest(header: Self.header, items: items)
        #expect(try Manifest(parsing: manifest.serialized(), header: Self.header) == manifest)
        let empty = Manifest(header: Self.header, items: [])
        #expect(try Manifest(parsing: empty.serialized(), header: Self.header) == empty)
    }

    @Test("the writer: compact, keys sorted, only what JSON requires escaped")
    func writerShape() throws {
        let manifest = Manifest(header: Self.header, items: [Self.item(1, name: "a/b \"q\" \\ \u{01}\n é", fade: true)])
        let text = String(decoding: manifest.serialized(), as: UTF8.self)
        #expect(text.hasPrefix(#"{"archiveId":"000102030405060708090a0b0c0d0e0f","created":"2026-11-18T11:06:40Z","items":[{"compartment":"fade","created":"#))
        #expect(text.hasSuffix(#""mode":"portable","version":1}"#))
        #expect(text.contains(#""name":"a/b \"q\" \\ \u0001\n é""#), "\(text)")
        #expect(!text.contains(" :") && !text.contains(", "), "no white space between tokens")
        // Foundation, as an independent parser, reads the same name back.
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let first = try #require((object["items"] as? [[String: Any]])?.first)
        #expect(first["name"] as? String == "a/b \"q\" \\ \u{01}\n é")
    }

    /// Replaces `old` in a written manifest's text once.
    static func edited(_ old: String, _ new: String) throws -> [UInt8] {
        let text = String(decoding: Manifest(header: header, items: [item(1, name: "a"), item(2, name: "b", fade: true)]).serialized(),
                          as: UTF8.self)
        #expect(text.contains(old), "fixture lacks \(old)")
        guard let range = text.range(of: old) else { return [] }
        return Array(text.replacingCharacters(in: range, with: new).utf8)
    }

    @Test("edits that parsers could read differently are refused, naming the field",
          arguments: [
            (#""size":2048"#, #""size":2048,"extra":1"#, "items[0].extra"),          // unknown field
            (#""id":"00000001"#, #""expires":null,"id":"00000001"#, "items[0].expires"), // null is not a time
            (#""size":2048"#, #""size":2048.0"#, "items[0].size"),                     // a fraction
            (#""size":2048"#, #""size":2.048e3"#, "items[0].size"),                    // an exponent
            (#""size":2048"#, #""size":"2048""#, "items[0].size"),                     // a string where a number belongs
            (#""size":2048"#, #""size":99999999999999999999"#, "items[0].size"),       // beyond Int64
            (#""size":2048"#, #""size":2048,"size":2048"#, "items[0]"),                // repeated
            (#""size":2048"#, #""size":2048,"s\u0069ze":2048"#, "items[0]"),           // repeated under an escape
            (#""kind":"note""#, #""kind":"video""#, "items[0].kind"),                  // not a kind
            (#""created":"2023"#, #""created":"x2023"#, "items[0].created"),           // not a timestamp
            (#""mode":"portable""#, #""mode":"portable","mode":"secure""#, nil),       // repeated at the top
            (#""version":1}"#, #""version":1} x"#, nil),                               // data after the document
          ] as [(String, String, String?)])
    func refused(_ old: String, _ new: String, _ field: String?) throws {
        let bytes = try Self.edited(old, new)
        do {
            _ = try Manifest(parsing: bytes, header: Self.header)
            Issue.record("accepted \(new)")
        } catch {
            #expect(error.description.contains(field.map { "field '\($0)" } ?? "manifest"), "\(new): \(error)")
        }
    }

    @Test("vaultKeys: a secure manifest names each compartment's key, read back exactly; a portable one, a missing compartment or a malformed ID is refused")
    func vaultKeys() throws {
        let secure = try ArchiveHeader(mode: .secure, archiveID: Array(0..<16), created: Self.header.created, kdf: nil)
        let ids: [Compartment: [UInt8]] = [.vault: Array(0..<16), .fade: Array(16..<32)]
        let items = [Self.item(1, name: "a"), Self.item(2, name: "b", fade: true)].map {
            Manifest.Item(id: $0.id, kind: $0.kind, compartment: $0.compartment, name: $0.name, created: $0.created,
                          expires: $0.expires, size: $0.size, sha256: $0.sha256, mode: .secure)
        }
        let manifest = Manifest(header: secure, items: items, vaultKeys: ids)
        let text = String(decoding: manifest.serialized(), as: UTF8.self)
        #expect(text.hasSuffix(#""mode":"secure","vaultKeys":{"fade":"101112131415161718191a1b1c1d1e1f","vault":"000102030405060708090a0b0c0d0e0f"},"version":1}"#), "\(text)")
        let parsed = try Manifest(parsing: manifest.serialized(), header: secure)
        #expect(parsed == manifest && parsed.vaultKeys == ids)
        #expect(try Manifest(parsing: Manifest(header: secure, items: items).serialized(), header: secure).vaultKeys == nil,
                "absent: an archive from before key rotation")

        func refused(_ old: String, _ new: String, header: ArchiveHeader = secure) {
            let edited = text.replacingOccurrences(of: old, with: new)
            #expect(edited != text, "fixture lacks \(old)")
            #expect(throws: FormatError.self, "\(new)") { try Manifest(parsing: Array(edited.utf8), header: header) }
        }
        refused(#""fade":"101112131415161718191a1b1c1d1e1f","#, "")                                  // an item's compartment missing
        refused(#""vault":"000102030405060708090a0b0c0d0e0f""#, #""vault":"0001""#)                    // too short
        refused(#""vault":"000102030405060708090a0b0c0d0e0f""#, #""vault":"00010203040506070809zz0b0c0d0e0f""#)
        refused(#""vault":"#, #""video":"00","vault":"#)                                               // not a compartment
        refused(#""vault":"000102030405060708090a0b0c0d0e0f""#, #""vault":"000102030405060708090a0b0c0d0e0f","vault":"000102030405060708090a0b0c0d0e0f""#)
        // A portable archive's manifest has no vault keys.
        let portable = Manifest(header: Self.header, items: [Self.item(1, name: "a")], vaultKeys: [.vault: Array(0..<16)])
        #expect(throws: FormatError.self) { try Manifest(parsing: portable.serialized(), header: Self.header) }
    }

    @Test("an escape that decodes to the same name is read as that name")
    func escapedName() throws {
        let bytes = try Self.edited(#""name":"a""#, #""name":"\u0061""#)
        #expect(try Manifest(parsing: bytes, header: Self.header).items[0].name == "a")
        let pair = try Self.edited(#""name":"a""#, #""name":"\ud83d\ude00""#)
        #expect(try Manifest(parsing: pair, header: Self.header).items[0].name == "😀")
        let lone = try Self.edited(#""name":"a""#, #""name":"\ud83d""#)
        #expect(throws: FormatError.self) { try Manifest(parsing: lone, header: Self.header) }
    }

    @Test("integers: the Int64 range exactly, no leading zeros; strings: valid UTF-8, no raw control characters")
    func readerEdges() throws {
        func integer(_ text: String) -> Int64? { try? JSONReader.read(Array(text.utf8)) { try $0.integer() } }
        #expect(integer("9223372036854775807") == .max)
        #expect(integer("-9223372036854775808") == .min)
        #expect(integer(" 0 ") == 0)
        for bad in ["9223372036854775808", "-9223372036854775809", "01", "-", "1 2", "1.5", "+1", ""] {
            #expect(integer(bad) == nil, "\(bad)")
        }
        #expect(try JSONReader.read(Array(#"  "ok"  "#.utf8)) { try $0.string() } == "ok")
        #expect((try? JSONReader.read([0x22, 0xC3, 0x28, 0x22]) { try $0.string() }) == nil, "invalid UTF-8")
        #expect((try? JSONReader.read([0x22, 0x41, 0x0A, 0x22]) { try $0.string() }) == nil, "a raw newline")
        #expect((try? JSONReader.read(Array(#"{"a":1,}"#.utf8)) { try $0.object { _, r in _ = try r.integer() } }) == nil,
                "a trailing comma")
        let deep = String(repeating: "[", count: 17) + String(repeating: "]", count: 17)
        #expect((try? JSONReader.read(Array(deep.utf8)) { try $0.skip() }) == nil, "17 levels")
        let allowed = String(repeating: "[", count: 16) + String(repeating: "]", count: 16)
        #expect((try? JSONReader.read(Array(allowed.utf8)) { try $0.skip() }) != nil, "16 levels")
    }
}
