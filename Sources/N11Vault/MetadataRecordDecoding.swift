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
                func text(_ slot: inout String?) -> Bool {
                    guard slot == nil, case .string(let string) = value else { return false }
                    slot = string
                    return true
                }
                func number(_ slot: inout Int64?) -> Bool {
                    guard slot == nil, case .integer(let number) = value else { return false }
                    slot = number
                    return true
                }
                if key.is("id") { return text(&id) }
                if key.is("name") { return text(&name) }
                if key.is("contentTag") { return text(&contentTag) }
                if key.is("sha256") { return text(&sha256) }
                if key.is("created") { return number(&created) }
                if key.is("size") { return number(&size) }
                if key.is("kind") {
                    guard kind == nil, case .string(let string) = value, let parsed = ItemKind(rawValue: string) else { return false }
                    kind = parsed
                    return true
                }
                if key.is("compartment") {
                    guard compartment == nil, case .string(let string) = value, let parsed = Compartment(rawValue: string) else { return false }
                    compartment = parsed
                    return true
                }
                if key.is("expires") {
                    guard !sawExpires else { return false }
                    sawExpires = true
                    switch value {
                    case .null: return true
                    case .integer(let number): expires = number; return true
                    case .string: return false
                    }
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
