import Glibc

/// Which items a command works on: IDs (whole, or a prefix of at least
/// `minimumPrefixLength` characters) and name globs (`fnmatch`, as a shell matches file
/// names). One home for the rules that `restore`, `list`, `vault list` and `vault cat`
/// share, for archive manifests and vault records alike. Every pattern must match: one that
/// matches nothing is an error naming it, never an empty result that looks like success.
public struct ItemSelection: Sendable, Equatable {
    public let ids: [String]
    public let names: [String]

    /// The shortest ID prefix taken: four hex digits, so a typo rarely matches by chance.
    public static let minimumPrefixLength = 4

    public init(ids: [String] = [], names: [String] = []) {
        self.ids = ids
        self.names = names
    }

    /// Selects everything.
    public var isEverything: Bool { ids.isEmpty && names.isEmpty }

    /// Why a pattern selects nothing, or too much where one item is needed.
    public enum Problem: Error, Equatable, Sendable {
        /// An ID prefix shorter than `minimumPrefixLength` that is no whole ID.
        case prefixTooShort(String)
        case noMatch(pattern: String, isName: Bool)
        /// An ID prefix or name that matches more than one item where one is needed.
        case ambiguous(pattern: String, matches: [String])
    }

    /// The positions in `items` selected, in their order. Each ID pattern matches a whole
    /// ID, the items starting with it, or the items of exactly that name (several only if
    /// `allowMany`), as `vault rm` takes an item; each name pattern any number of items.
    public func indices<Item>(in items: [Item], id: (Item) -> String, name: (Item) -> String,
                              allowMany: Bool = true) throws(Problem) -> [Int] {
        if isEverything { return Array(items.indices) }
        var chosen = Set<Int>()
        for pattern in ids {
            chosen.formUnion(try Self.matches(ofIDOrName: pattern, in: items, id: id, name: name, allowMany: allowMany))
        }
        for pattern in names {
            let matches = items.indices.filter { Self.nameMatches(pattern, name(items[$0])) }
            guard !matches.isEmpty else { throw .noMatch(pattern: pattern, isName: true) }
            chosen.formUnion(matches)
        }
        return chosen.sorted()
    }

    /// The one item `pattern` names: an ID, a unique ID prefix, or (failing those, and only
    /// if `name` is given) a unique name or name glob. What `vault cat` takes.
    public static func single<Item>(_ pattern: String, in items: [Item], id: (Item) -> String,
                                    name: ((Item) -> String)? = nil) throws(Problem) -> Int {
        let byID: [Int]
        do { byID = try matches(ofID: pattern, in: items, id: id, allowMany: false) } catch {
            if case .ambiguous = error { throw error }
            byID = []
        }
        if let only = byID.first { return only }
        let byName = name.map { name in items.indices.filter { nameMatches(pattern, name(items[$0])) } } ?? []
        switch byName.count {
        case 0:
            if pattern.count < minimumPrefixLength && isHex(pattern) { throw .prefixTooShort(pattern) }
            throw .noMatch(pattern: pattern, isName: false)
        case 1: return byName[0]
        default: throw .ambiguous(pattern: pattern, matches: byName.map { id(items[$0]) })
        }
    }

    /// An ID, an ID prefix, or an exact name (no glob: `photo[1].jpg` is not `photo1.jpg`).
    /// A word that starts one item's ID and is another item's name is ambiguous: which was
    /// meant is not guessed.
    private static func matches<Item>(ofIDOrName pattern: String, in items: [Item], id: (Item) -> String,
                                      name: (Item) -> String, allowMany: Bool) throws(Problem) -> [Int] {
        let byName = items.indices.filter { name(items[$0]) == pattern }
        let byID: [Int]
        do {
            byID = try matches(ofID: pattern, in: items, id: id, allowMany: allowMany)
        } catch .ambiguous(let pattern, let matches) {
            // Several IDs start with it: refused even if it is also a name (which was meant?).
            throw .ambiguous(pattern: pattern, matches: matches)
        } catch {
            guard !byName.isEmpty else { throw error }
            byID = []
        }
        if byName.isEmpty || Set(byName).isSubset(of: byID) { return byID }
        guard byID.isEmpty, byName.count == 1 || allowMany else {
            throw .ambiguous(pattern: pattern, matches: (byID + byName.filter { !byID.contains($0) }).map { id(items[$0]) })
        }
        return byName
    }

    private static func matches<Item>(ofID pattern: String, in items: [Item], id: (Item) -> String,
                                      allowMany: Bool) throws(Problem) -> [Int] {
        let wanted = pattern.uppercased()
        if let exact = items.indices.first(where: { id(items[$0]) == wanted }) { return [exact] }
        guard wanted.count >= minimumPrefixLength else {
            throw isHex(pattern) ? .prefixTooShort(pattern) : .noMatch(pattern: pattern, isName: false)
        }
        let matches = items.indices.filter { id(items[$0]).hasPrefix(wanted) }
        guard !matches.isEmpty else { throw .noMatch(pattern: pattern, isName: false) }
        guard matches.count == 1 || allowMany else { throw .ambiguous(pattern: pattern, matches: matches.map { id(items[$0]) }) }
        return matches
    }

    /// Whether `name` matches the shell glob `pattern` (`*`, `?`, `[…]`; a `*` also
    /// matches a leading dot, since these are labels, not files).
    public static func nameMatches(_ pattern: String, _ name: String) -> Bool {
        fnmatch(pattern, name, 0) == 0
    }

    private static func isHex(_ text: String) -> Bool {
        !text.isEmpty && text.allSatisfy { $0.isHexDigit || $0 == "-" }
    }
}

extension ItemSelection.Problem {
    /// The message, naming `place` (the archive or vault searched).
    public func description(in place: String) -> String {
        switch self {
        case .prefixTooShort(let prefix):
            return "'\(prefix)' is too short for an item ID prefix (at least \(ItemSelection.minimumPrefixLength) characters)"
        case let .noMatch(pattern, isName):
            return isName ? "no item named '\(pattern)' in \(place)" : "no item '\(pattern)' in \(place)"
        case let .ambiguous(pattern, matches):
            let shown = matches.prefix(3).joined(separator: ", ") + (matches.count > 3 ? ", …" : "")
            return "'\(pattern)' matches \(matches.count) items in \(place) (\(shown))"
        }
    }

    /// What to do, naming the command that lists the IDs and names.
    public func hint(listing: String) -> String {
        switch self {
        case .prefixTooShort: return "give at least \(ItemSelection.minimumPrefixLength) characters of the ID (`\(listing)` shows them)"
        case .noMatch: return "`\(listing)` shows the IDs and names; quote a --name glob so the shell does not expand it"
        case .ambiguous: return "give more characters of the ID (`\(listing)` shows them)"
        }
    }
}
