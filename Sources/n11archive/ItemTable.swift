import Foundation
import N11Format
import N11System

/// The item table of `vault list` and `list`, oldest first (then by name): the order a
/// person looks for a photo in. Every field is printed in full when a program reads it (a
/// pipe, a file) or the terminal is wide enough. On a narrower terminal (80 columns) a row
/// of 36-character IDs and RFC 3339 times runs to 110–130 columns and wraps, so there each
/// ID is cut to the shortest prefix of at least 8 characters that is still unique (every
/// command that takes an ID takes such a prefix), times lose their seconds, the EXPIRES
/// column goes when nothing expires, and a name too long for the rest of the line ends in
/// "…" (measured in terminal columns: a CJK character or an emoji takes two). `--json` is
/// the form for scripts.
struct ItemTable {
    struct Row {
        let id: String
        let kind: String
        let compartment: String
        let size: Int64
        let created: Date
        let expires: Date?
        let name: String
    }

    static let header = ["ID", "KIND", "COMPARTMENT", "SIZE", "CREATED", "EXPIRES", "NAME"]

    static func print(_ rows: [Row]) {
        // Names as a file manager sorts them ("DSC 2" before "DSC 10", "é" with "e"): what
        // `localizedStandardCompare` does, with the locale made once, not once a comparison
        // (making it was half of `vault list` of 100,000 items made in one second).
        let locale = Locale.current
        let sorted = rows.sorted { a, b in
            if a.created != b.created { return a.created < b.created }
            let order = a.name == b.name ? .orderedSame
                : a.name.compare(b.name, options: [.caseInsensitive, .numeric, .widthInsensitive, .forcedOrdering], range: nil, locale: locale)
            return order != .orderedSame ? order == .orderedAscending : a.id < b.id
        }
        let full = [header] + sorted.map { row in
            [row.id, row.kind, row.compartment, Console.byteCount(row.size), Timestamp.string(row.created, withFraction: false),
             row.expires.map { Timestamp.string($0, withFraction: false) } ?? "-", row.name]
        }
        guard Terminal.isTerminal(1), let columns = Terminal.columns(1), width(of: full) > columns else {
            Console.table(full)
            return
        }
        let ids = shortestUniquePrefixes(sorted.map(\.id), atLeast: 8)
        var compact = [header] + sorted.indices.map { n in
            let row = sorted[n]
            return [ids[n], row.kind, row.compartment, Console.byteCount(row.size), minutes(row.created),
                    row.expires.map(minutes) ?? "-", row.name]
        }
        // No EXPIRES column when nothing expires (most vaults): its room goes to the names.
        if sorted.allSatisfy({ $0.expires == nil }) { compact = compact.map { $0.enumerated().filter { $0.offset != 5 }.map(\.element) } }
        let room = columns - width(of: compact.map { Array($0.dropLast()) }) - 2
        if room >= 8 {
            for n in compact.indices.dropFirst() {
                compact[n][compact[n].count - 1] = DisplayWidth.truncated(compact[n][compact[n].count - 1], to: room)
            }
        }
        Console.table(compact)
    }

    /// A table's widest row: its columns' widths and two spaces between them.
    private static func width(of rows: [[String]]) -> Int {
        guard let first = rows.first else { return 0 }
        let widths = first.indices.map { column in rows.map { DisplayWidth.of($0[column]) }.max() ?? 0 }
        return widths.reduce(0, +) + 2 * (widths.count - 1)
    }

    /// "2026-11-26 09:53Z": the time to the minute, still UTC and still sortable.
    private static func minutes(_ date: Date) -> String {
        let full = Timestamp.string(date, withFraction: false)   // 2026-11-26T09:53:38Z
        return String(full.prefix(10)) + " " + String(full.dropFirst(11).prefix(5)) + "Z"
    }

    /// Each ID cut to the shortest prefix of at least `minimum` characters that no other ID
    /// shares (as git abbreviates commits).
    static func shortestUniquePrefixes(_ ids: [String], atLeast minimum: Int) -> [String] {
        let order = ids.indices.sorted { ids[$0] < ids[$1] }
        var lengths = [Int](repeating: minimum, count: ids.count)
        func common(_ a: String, _ b: String) -> Int { zip(a, b).prefix { $0 == $1 }.count }
        for (position, index) in order.enumerated() {
            if position > 0 { lengths[index] = max(lengths[index], common(ids[index], ids[order[position - 1]]) + 1) }
            if position + 1 < order.count { lengths[index] = max(lengths[index], common(ids[index], ids[order[position + 1]]) + 1) }
        }
        return ids.indices.map { String(ids[$0].prefix(lengths[$0])) }
    }
}
