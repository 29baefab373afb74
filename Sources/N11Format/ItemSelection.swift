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
        var matcher = Matcher(self, allowMany: allowMany)
        for item in items { matcher.see(id: id(item), name: name(item)) }
        return Array(try matcher.finish())
    }

    /// `indices(in:)` for items seen one at a time, in order, so that a selection from an
    /// archive of millions never holds the archive's items (issue 34). It keeps a bit an
    /// item for the name globs, and for each ID pattern the items it could mean (its ID,
    /// the IDs it starts, the items of exactly that name) until `finish` decides which.
    public struct Matcher {
        /// What one ID pattern (an ID, an ID prefix or an exact name) has met so far.
        private struct Candidates {
            let pattern: String
            /// The pattern as IDs are written (upper case).
            let wanted: String
            /// Whether `wanted` is long enough to be taken as a prefix.
            let isPrefix: Bool
            var exactID: (position: Int, id: String)?
            /// Items whose ID starts with `wanted` (gathered only if it is long enough).
            var byPrefix: [(position: Int, id: String)] = []
            var byName: [(position: Int, id: String)] = []
        }

        private let names: [String]
        private let allowMany: Bool
        private var candidates: [Candidates]
        /// Items any name glob matched, a bit each.
        private var globbed: [UInt64] = []
        private var globMatches: [Int]
        private var seen = 0

        public init(_ selection: ItemSelection, allowMany: Bool = true) {
            names = selection.names
            self.allowMany = allowMany
            candidates = selection.ids.map {
                let wanted = $0.uppercased()   // may be longer than the word: "ß" is "SS"
                return Candidates(pattern: $0, wanted: wanted, isPrefix: wanted.count >= ItemSelection.minimumPrefixLength)
            }
            globMatches = Array(repeating: 0, count: selection.names.count)
        }

        /// The next item, at position `seen` (0 for the first).
        public mutating func see(id: String, name: String) {
            let position = seen
            seen += 1
            if position & 63 == 0 { globbed.append(0) }
            for n in candidates.indices {
                if candidates[n].exactID == nil && id == candidates[n].wanted { candidates[n].exactID = (position, id) }
                if candidates[n].isPrefix && id.hasPrefix(candidates[n].wanted) {
                    candidates[n].byPrefix.append((position, id))
                }
                if name == candidates[n].pattern { candidates[n].byName.append((position, id)) }
            }
            for (n, glob) in names.enumerated() where ItemSelection.nameMatches(glob, name) {
                globMatches[n] += 1
                globbed[position >> 6] |= 1 << UInt64(position & 63)
            }
        }

        /// The items selected, or why the selection fails: the first ID pattern (in the order
        /// given) that fails, then the first name glob that matched nothing.
        public consuming func finish() throws(Problem) -> PositionBitmap {
            var chosen = globbed
            for pattern in candidates {
                for position in try Self.choice(pattern, allowMany: allowMany) {
                    chosen[position >> 6] |= 1 << UInt64(position & 63)
                }
            }
            if let unmatched = globMatches.firstIndex(of: 0) { throw .noMatch(pattern: names[unmatched], isName: true) }
            return PositionBitmap(words: chosen, limit: seen)
        }

        /// What an ID pattern picks. An exact ID is that item; failing that, a prefix of at
        /// least `minimumPrefixLength` picks the items it starts (one only unless
        /// `allowMany`); an exact name picks its items. A word that starts one item's ID and
        /// is another item's name is ambiguous: which was meant is not guessed.
        private static func choice(_ pattern: Candidates, allowMany: Bool) throws(Problem) -> [Int] {
            let byName = pattern.byName
            var byID: [(position: Int, id: String)] = []
            if let exact = pattern.exactID {
                byID = [exact]
            } else if !pattern.isPrefix {
                // Too short for a prefix: only a name, if it is one.
                guard !byName.isEmpty else {
                    throw isHex(pattern.pattern) ? .prefixTooShort(pattern.pattern) : .noMatch(pattern: pattern.pattern, isName: false)
                }
            } else if pattern.byPrefix.count > 1 && !allowMany {
                // Several IDs start with it: refused even if it is also a name (which was meant?).
                throw .ambiguous(pattern: pattern.pattern, matches: pattern.byPrefix.map(\.id))
            } else if pattern.byPrefix.isEmpty {
                guard !byName.isEmpty else { throw .noMatch(pattern: pattern.pattern, isName: false) }
            } else {
                byID = pattern.byPrefix
            }
            let idPositions = Set(byID.map(\.position))
            if byName.isEmpty || byName.allSatisfy({ idPositions.contains($0.position) }) { return byID.map(\.position) }
            guard byID.isEmpty, byName.count == 1 || allowMany else {
                throw .ambiguous(pattern: pattern.pattern,
                                 matches: (byID + byName.filter { !idPositions.contains($0.position) }).map(\.id))
            }
            return byName.map(\.position)
        }
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
        case .ambiguous: return "give the item's ID, or enough of it to be unique (`\(listing)` shows the IDs and names)"
        }
    }
}
