import N11Format

/// Reads the metadata records this vault writes without `JSONDecoder`, which took about 15 µs
/// per record: most of what `vault list` and the start of `create` cost on a 20,000-item
/// vault. Records are flat objects of strings and integers (`ItemMetadata.encoder`); the
/// fields are matched on their key bytes and filled directly (a dictionary of them cost as
/// much as the scanning). Returns nil for anything `FastJSONScanner` declines, a field of the
/// wrong type, a repeated or missing field: the caller then asks `JSONDecoder`.
enum MetadataRecordDecoding {
    static func metadata(from bytes: [UInt8]) -> ItemMetadata? {
        var id: String?, kind: ItemKind?, compartment: Compartment?, name: String?, contentTag: String?, sha256: String?
        var created: Int64?, size: Int64?, expires: Int64?, sawExpires = false
        let complete = FastJSONScanner.scan(bytes) { scanner -> Bool? in
            scanner.object { key, scanner in
                guard let value = scanner.value() else { return false }
                if key.is("id") { return FastJSONScanner.fill(&id, value.string) }
                if key.is("name") { return FastJSONScanner.fill(&name, value.string) }
                if key.is("contentTag") { return FastJSONScanner.fill(&contentTag, value.string) }
                if key.is("sha256") { return FastJSONScanner.fill(&sha256, value.string) }
                if key.is("created") { return FastJSONScanner.fill(&created, value.integer) }
                if key.is("size") { return FastJSONScanner.fill(&size, value.integer) }
                if key.is("kind") { return FastJSONScanner.fill(&kind, value.string.flatMap(ItemKind.init(rawValue:))) }
                if key.is("compartment") {
                    return FastJSONScanner.fill(&compartment, value.string.flatMap(Compartment.init(rawValue:)))
                }
                if key.is("expires") {
                    // Optional in the synthesised conformance: null and absent both mean none.
                    guard !sawExpires, value.string == nil else { return false }
                    sawExpires = true
                    expires = value.integer
                    return true
                }
                // Keys the type does not know are ignored, as its synthesised `Decodable`
                // conformance ignores them (JSONDecoder still wants them valid UTF-8).
                return key.string != nil
            } ? true : nil
        }
        guard complete == true, let id, let kind, let compartment, let name, let created, let size, let contentTag, let sha256 else {
            return nil
        }
        return ItemMetadata(id: id, kind: kind, compartment: compartment, name: name, createdMilliseconds: created,
                            expiresMilliseconds: expires, size: size, contentTag: contentTag, sha256: sha256)
    }
}
