import Foundation
import Testing
@testable import N11Format

/// The manifest's fast path (`Manifest.scanned`) must give exactly what `JSONDecoder` gives
/// for what it accepts, take the manifests this tool writes, and decline everything else so
/// that `JSONDecoder`'s verdict stands.
@Suite("Fast JSON: the manifest scanner agrees with JSONDecoder or declines")
struct FastJSONTests {
    static let header = try! ArchiveHeader(mode: .portable, archiveID: Array(0..<16), created: Date(timeIntervalSince1970: 1_795_000_000.25),
                                           kdf: .init(opsLimit: 1, memoryKiB: 8192, salt: Array(repeating: 7, count: 16)))

    static func item(_ n: Int, name: String, fade: Bool = false, size: Int64 = 2048) -> Manifest.Item {
        let id = String(format: "%08X-0000-4000-8000-%012X", n, n * 7919)
        return Manifest.Item(id: id, kind: n % 2 == 0 ? .photo : .note, compartment: fade ? .fade : .vault, name: name,
                             created: Date(timeIntervalSince1970: 1_700_000_000 + Double(n) * 1.001),
                             expires: fade ? Date(timeIntervalSince1970: 1_900_000_000.5) : nil, size: size,
                             sha256: String(repeating: "ab", count: 32), mode: .portable)
    }

    static func decodedByFoundation(_ bytes: [UInt8]) throws -> Manifest {
        try JSONCoding.decoder().decode(Manifest.self, from: Data(bytes))
    }

    @Test("manifests as create writes them take the fast path and match JSONDecoder field for field")
    func writtenManifests() throws {
        var generator = SystemRandomNumberGenerator()
        let names = ["IMG_0001.jpg", "note", "Ünïcödé ✓ 😀.txt", "a b  c", "日本語のメモ", "x", String(repeating: "n", count: 255)]
        var items: [Manifest.Item] = []
        for n in 0..<300 {
            let name = names[n % names.count]
            items.append(Self.item(n, name: name, fade: n % 5 == 0,
                                   size: [0, 1, 2048, Int64(generator.next() % (1 << 40)), FormatLimits.itemSize][n % 5]))
        }
        let manifest = Manifest(header: Self.header, items: items)
        let bytes = try manifest.serialized()
        let scanned = try #require(Manifest.scanned(bytes), "the fast path declined a manifest create writes")
        #expect(scanned == manifest)
        #expect(scanned == (try Self.decodedByFoundation(bytes)))
        #expect(try Manifest(parsing: bytes, header: Self.header) == manifest)
    }

    @Test("the direct writer writes byte for byte what JSONEncoder writes, or leaves it to JSONEncoder")
    func directWriter() throws {
        let names = ["IMG_0001.jpg", "Ünïcödé ✓ 😀.txt", "del\u{7F}", "line sep \u{2028} para \u{2029}", "a/b\\c", "tab\tx",
                     "quote\"", "\u{1F}unit", "~!@#$%^&*()_+{}[]|:;'<>?,.`", String(repeating: "é", count: 127)]
        for (n, name) in names.enumerated() {
            let manifest = Manifest(header: Self.header, items: [Self.item(n, name: name, fade: n % 2 == 0), Self.item(n + 100, name: "x")])
            let encoded = Array(try JSONCoding.encoder().encode(manifest))
            #expect(try manifest.serialized() == encoded, "\(name)")
            let needsEscape = name.utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
            #expect((manifest.directlyWritten() == nil) == needsEscape, "\(name)")
        }
        let empty = Manifest(header: Self.header, items: [])
        #expect(try #require(empty.directlyWritten()) == Array(try JSONCoding.encoder().encode(empty)))
    }

    @Test("names that JSON must escape leave the manifest to JSONDecoder, with the same result")
    func escapedNames() throws {
        for name in [#"quote " inside"#, #"back\slash"#, "tab\there", "bell\u{07}", "del\u{7F}ok"] {
            let manifest = Manifest(header: Self.header, items: [Self.item(1, name: name), Self.item(2, name: "plain")])
            let bytes = try manifest.serialized()
            let escaped = String(decoding: bytes, as: UTF8.self).contains("\\")
            #expect((Manifest.scanned(bytes) == nil) == escaped, "\(name)")
            #expect(try Manifest(parsing: bytes, header: Self.header) == manifest, "\(name)")
        }
    }

    /// Replaces `old` in a written manifest's text once.
    static func edited(_ old: String, _ new: String) throws -> [UInt8] {
        let text = String(decoding: try Manifest(header: header, items: [item(1, name: "a"), item(2, name: "b", fade: true)]).serialized(),
                          as: UTF8.self)
        #expect(text.contains(old), "fixture lacks \(old)")
        guard let range = text.range(of: old) else { return [] }
        return Array(text.replacingCharacters(in: range, with: new).utf8)
    }

    @Test("anything JSONDecoder would judge differently is declined, and the verdict stays JSONDecoder's",
          arguments: [
            (#""size":2048"#, #""size":2048,"extra":1"#, false),     // unknown field: refused
            (#""id":"00000001"#, #""expires":null,"id":"00000001"#, false), // null expiry of a non-fade item: refused
            (#""size":2048"#, #""size":2048.0"#, true),               // a fraction JSONDecoder takes as 2048
            (#""size":2048"#, #""size":2.048e3"#, true),              // an exponent JSONDecoder takes as 2048
            (#""name":"a""#, #""name":"\u0061""#, true),              // an escape that decodes to the same name
            (#""size":2048"#, #""size":"2048""#, false),              // a string where a number belongs
            (#""size":2048"#, #""size":99999999999999999999"#, false), // beyond Int64
            (#""created":"2023"#, #""created":"1999"#, true),         // another valid time: decoded, then compared
          ] as [(String, String, Bool)])
    func declined(_ old: String, _ new: String, _ foundationAccepts: Bool) throws {
        let bytes = try Self.edited(old, new)
        let foundation = try? Self.decodedByFoundation(bytes)
        #expect((foundation != nil) == foundationAccepts, "JSONDecoder on \(new)")
        if let scanned = Manifest.scanned(bytes) {
            // Whatever the fast path does accept must be exactly what JSONDecoder makes of it.
            #expect(scanned == foundation, "\(new)")
        }
        if !foundationAccepts {
            #expect(Manifest.scanned(bytes) == nil, "\(new)")
            #expect(throws: FormatError.self) { try Manifest(parsing: bytes, header: Self.header) }
        }
    }

    @Test("the scanner's integers: the Int64 range exactly, no leading zeros, nothing after the document")
    func scannerEdges() {
        func integer(_ text: String) -> Int64? {
            FastJSONScanner.scan(Array(text.utf8)) { scanner -> Int64? in
                if case .integer(let n)? = scanner.value() { return n } else { return nil }
            }
        }
        #expect(integer("9223372036854775807") == .max)
        #expect(integer("-9223372036854775808") == .min)
        #expect(integer(" 0 ") == 0)
        #expect(integer("9223372036854775808") == nil)
        #expect(integer("-9223372036854775809") == nil)
        #expect(integer("01") == nil)
        #expect(integer("-") == nil)
        #expect(integer("1 2") == nil)
        #expect(integer("1.5") == nil)
        let text = FastJSONScanner.scan(Array(#"  "ok"  "#.utf8)) { scanner -> String? in
            if case .string(let s)? = scanner.value() { return s } else { return nil }
        }
        #expect(text == "ok")
        #expect(FastJSONScanner.scan([0x22, 0xC3, 0x28, 0x22]) { $0.value() } == nil, "invalid UTF-8 is declined")
        #expect(FastJSONScanner.scan(Array(#"{"a":1,}"#.utf8)) { scanner -> Bool? in
            scanner.object { _, scanner in scanner.value() != nil } ? true : nil
        } == nil, "a trailing comma is declined")
    }
}
