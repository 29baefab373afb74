import Foundation

extension Manifest {
    /// The manifest read with `FastJSONScanner` instead of `JSONDecoder`, which took about
    /// 15 µs per item: a third of verifying an archive of 100,000 notes, all of it before the
    /// first payload was read. Nil for anything it does not take exactly as `Decodable` would
    /// (an unknown, repeated or missing field, a wrong type, a malformed timestamp, an escape in
    /// a string): `init(parsing:)` then decodes the same bytes with `JSONDecoder`, whose
    /// verdict and message stand. The checks after decoding apply to both paths alike.
    static func scanned(_ bytes: [UInt8]) -> Manifest? {
        var version: Int64?, archiveId: String?, mode: ArchiveMode?, created: Date?, items: [Item]?
        return FastJSONScanner.scan(bytes) { scanner -> Manifest? in
            let complete = scanner.object { key, scanner in
                if key.is("items") {
                    guard items == nil else { return false }
                    var list: [Item] = []
                    guard scanner.array({ scanner in
                        guard let item = scannedItem(&scanner) else { return false }
                        list.append(item)
                        return true
                    }) else { return false }
                    items = list
                    return true
                }
                guard let value = scanner.value() else { return false }
                if key.is("version") { return FastJSONScanner.fill(&version, value.integer) }
                if key.is("archiveId") { return FastJSONScanner.fill(&archiveId, value.string) }
                if key.is("mode") { return FastJSONScanner.fill(&mode, value.string.flatMap(ArchiveMode.init(rawValue:))) }
                if key.is("created") { return FastJSONScanner.fill(&created, value.string.flatMap(Timestamp.parse)) }
                return false  // unknown: JSONDecoder names it
            }
            guard complete, let version, let archiveId, let mode, let created, let items,
                  let shortVersion = Int(exactly: version) else { return nil }
            return Manifest(version: shortVersion, archiveId: archiveId, mode: mode, created: created, items: items)
        }
    }

    private static func scannedItem(_ scanner: inout FastJSONScanner) -> Item? {
        var id: String?, kind: ItemKind?, compartment: Compartment?, name: String?, created: Date?
        var expires: Date?, size: Int64?, sha256: String?, entry: String?, payloadSize: Int64?
        let complete = scanner.object { key, scanner in
            guard let value = scanner.value() else { return false }
            if key.is("id") { return FastJSONScanner.fill(&id, value.string) }
            if key.is("kind") { return FastJSONScanner.fill(&kind, value.string.flatMap(ItemKind.init(rawValue:))) }
            if key.is("compartment") { return FastJSONScanner.fill(&compartment, value.string.flatMap(Compartment.init(rawValue:))) }
            if key.is("name") { return FastJSONScanner.fill(&name, value.string) }
            if key.is("created") { return FastJSONScanner.fill(&created, value.string.flatMap(Timestamp.parse)) }
            // Absent for items that do not fade; null is refused (by JSONDecoder, with its message).
            if key.is("expires") { return FastJSONScanner.fill(&expires, value.string.flatMap(Timestamp.parse)) }
            if key.is("size") { return FastJSONScanner.fill(&size, value.integer) }
            if key.is("sha256") { return FastJSONScanner.fill(&sha256, value.string) }
            if key.is("entry") { return FastJSONScanner.fill(&entry, value.string) }
            if key.is("payloadSize") { return FastJSONScanner.fill(&payloadSize, value.integer) }
            return false
        }
        guard complete, let id, let kind, let compartment, let name, let created, let size, let sha256, let entry,
              let payloadSize else { return nil }
        return Item(id: id, kind: kind, compartment: compartment, name: name, created: created, expires: expires,
                    size: size, sha256: sha256, entry: entry, payloadSize: payloadSize)
    }
}

extension Manifest {
    /// What `JSONCoding.encoder()` writes (sorted keys, no white space, `expires` left out when
    /// absent), or nil if a string would need an escape.
    func directlyWritten() -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(256 + items.count * 330)
        func raw(_ text: StaticString) {
            out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
        }
        func string(_ text: String) -> Bool {
            out.append(UInt8(ascii: "\""))
            for byte in text.utf8 {
                guard byte >= 0x20, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else { return false }
                out.append(byte)
            }
            out.append(UInt8(ascii: "\""))
            return true
        }
        func number(_ value: Int64) { out.append(contentsOf: String(value).utf8) }

        raw(#"{"archiveId":"#)
        guard string(archiveId) else { return nil }
        raw(#","created":"#)
        guard string(Timestamp.string(created)) else { return nil }
        raw(#","items":["#)
        for (n, item) in items.enumerated() {
            raw(n == 0 ? #"{"compartment":"# : #",{"compartment":"#)
            guard string(item.compartment.rawValue) else { return nil }
            raw(#","created":"#)
            guard string(Timestamp.string(item.created)) else { return nil }
            raw(#","entry":"#)
            guard string(item.entry) else { return nil }
            if let expires = item.expires {
                raw(#","expires":"#)
                guard string(Timestamp.string(expires)) else { return nil }
            }
            raw(#","id":"#)
            guard string(item.id) else { return nil }
            raw(#","kind":"#)
            guard string(item.kind.rawValue) else { return nil }
            raw(#","name":"#)
            guard string(item.name) else { return nil }
            raw(#","payloadSize":"#)
            number(item.payloadSize)
            raw(#","sha256":"#)
            guard string(item.sha256) else { return nil }
            raw(#","size":"#)
            number(item.size)
            raw("}")
        }
        raw(#"],"mode":"#)
        guard string(mode.rawValue) else { return nil }
        raw(#","version":"#)
        number(Int64(version))
        raw("}")
        return out
    }
}
