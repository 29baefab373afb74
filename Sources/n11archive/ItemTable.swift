import Foundation
import N11Crypto
import N11Format
import N11System
import N11Vault

/// The item table of `vault list` and `list`, oldest first (then by name): the order a
/// person looks for a photo in. Every field is printed in full when a program reads it (a
/// pipe, a file) or the terminal is wide enough. On a narrower terminal (80 columns) a row
/// of 36-character IDs and RFC 3339 times runs to 110–130 columns and wraps, so there each
/// ID is cut to the shortest prefix of at least 8 characters that is still unique (every
/// command that takes an ID takes such a prefix), times lose their seconds, the EXPIRES
/// column goes when nothing expires, and a name too long for the rest of the line ends in
/// "…" (measured in terminal columns: a CJK character or an emoji takes two). `--json` is
/// the form for scripts.
///
/// Rows come in ID order (the catalogue's, a version 3 archive's pages'), one at a time:
/// each ID's shortest unique prefix is found from its neighbours as they pass, the widths of
/// both forms are measured, and the rows are sorted by `ExternalSorter`, sealed on disk past
/// a run's worth, so a listing of millions of items holds a run, not the vault (issue 34).
struct ItemTable {
    /// A class: the sorts compare rows of the same creation time through closures, and each
    /// comparison copied both rows, a retain and a release for every string in them (6% of
    /// `vault list` of 3,000,000 items); a class is one.
    final class Row {
        let id: String
        let kind: String
        let compartment: String
        let size: Int64
        let created: Date
        let expires: Date?
        let name: String
        /// The length of its ID's shortest unique prefix (at least 8).
        var prefixLength: Int

        init(id: String, kind: String, compartment: String, size: Int64, created: Date, expires: Date?, name: String,
             prefixLength: Int = 36) {
            (self.id, self.kind, self.compartment, self.size) = (id, kind, compartment, size)
            (self.created, self.expires, self.name, self.prefixLength) = (created, expires, name, prefixLength)
        }

        /// Its creation time as a number in the same order (`ExternalSorter`'s key).
        var createdOrder: UInt64 { Timestamp.orderKey(created) }
    }

    static let header = ["ID", "KIND", "COMPARTMENT", "SIZE", "CREATED", "EXPIRES", "NAME"]

    private var sorter: ExternalSorter<Row>
    /// The row waiting for the next ID to know its unique prefix.
    private var waiting: Row?
    private var previousID = ""
    /// A row came out of ID order: unique prefixes cannot be trusted, whole IDs are shown.
    private var outOfOrder = false
    private var fullWidths = header.map(DisplayWidth.of)
    private var compactWidths = header.map(DisplayWidth.of)
    private var anyExpires = false
    private(set) var count = 0

    init() {
        // Names as a file manager sorts them ("DSC 2" before "DSC 10", "é" with "e").
        let names = NameOrder()
        // By creation time (the key), then name, then ID.
        sorter = ExternalSorter(runLength: Output.sortRunRows, directory: Output.spoolDirectory, encode: Self.encode, decode: Self.decode,
                                key: \.createdOrder) { a, b in
            let order = names.compare(a.name, b.name)
            return order != .orderedSame ? order == .orderedAscending : a.id < b.id
        }
    }

    /// Takes the next row; rows are to come in ascending ID order.
    mutating func add(_ row: Row) throws {
        if row.id <= previousID { outOfOrder = true }
        // The waiting row is the previous one: one shared prefix serves both.
        let shared = Self.common(previousID, row.id)
        if let waiting {
            waiting.prefixLength = min(36, max(waiting.prefixLength, shared + 1))
            try take(waiting)
        }
        row.prefixLength = min(36, max(8, shared + 1))
        previousID = row.id
        waiting = row
    }

    private mutating func take(_ row: Row) throws {
        // Both forms' widths from one rendering of each field: `fullCells` and `compactCells`
        // here made two arrays and three timestamps a row (7% of `vault list` of 3,000,000).
        func widen(_ column: Int, full: Int, compact: Int) {
            fullWidths[column] = max(fullWidths[column], full)
            compactWidths[column] = max(compactWidths[column], compact)
        }
        widen(0, full: DisplayWidth.of(row.id), compact: DisplayWidth.of(String(row.id.prefix(row.prefixLength))))
        let kind = DisplayWidth.of(row.kind), compartment = DisplayWidth.of(row.compartment)
        widen(1, full: kind, compact: kind)
        widen(2, full: compartment, compact: compartment)
        let size = DisplayWidth.of(Console.byteCount(row.size))
        widen(3, full: size, compact: size)
        let created = Timestamp.string(row.created, withFraction: false)
        widen(4, full: DisplayWidth.of(created), compact: Self.minutesWidth(full: created))
        if let expires = row.expires.map({ Timestamp.string($0, withFraction: false) }) {
            widen(5, full: DisplayWidth.of(expires), compact: Self.minutesWidth(full: expires))
            anyExpires = true
        } else {
            widen(5, full: 1, compact: 1)
        }
        let name = DisplayWidth.of(Console.escapingControlCharacters(row.name))
        widen(6, full: name, compact: name)
        count += 1
        try sorter.add(row)
    }

    /// Prints the table; the table is used up.
    mutating func print() throws {
        if let waiting { try take(waiting) }
        waiting = nil
        let fullWidth = fullWidths.reduce(0, +) + 2 * (fullWidths.count - 1)
        guard Terminal.isTerminal(1), let columns = Terminal.columns(1), fullWidth > columns else {
            var writer = Console.TableWriter(widths: fullWidths)
            writer.write(escapedRow: Self.header)
            try sorter.forEachSorted { writer.write(escapedRow: Self.fullCells($0)) }
            writer.finish()
            return
        }
        // No EXPIRES column when nothing expires (most vaults): its room goes to the names.
        let anyExpires = anyExpires
        // Rows out of ID order show whole IDs: their column is as wide as a whole ID.
        if outOfOrder { compactWidths[0] = max(compactWidths[0], fullWidths[0]) }
        func keep<Cell>(_ cells: [Cell]) -> [Cell] { anyExpires ? cells : cells.enumerated().filter { $0.offset != 5 }.map(\.element) }
        let widths = keep(compactWidths)
        let room = columns - (widths.dropLast().reduce(0, +) + 2 * (widths.count - 2)) - 2
        var writer = Console.TableWriter(widths: widths)
        writer.write(escapedRow: keep(Self.header))
        let wholeIDs = outOfOrder
        try sorter.forEachSorted { row in
            if wholeIDs { row.prefixLength = 36 }
            var cells = keep(Self.compactCells(row))
            if room >= 8 { cells[cells.count - 1] = DisplayWidth.truncated(cells[cells.count - 1], to: room) }
            writer.write(escapedRow: cells)
        }
        writer.finish()
    }

    private static func fullCells(_ row: Row) -> [String] {
        [row.id, row.kind, row.compartment, Console.byteCount(row.size), Timestamp.string(row.created, withFraction: false),
         row.expires.map { Timestamp.string($0, withFraction: false) } ?? "-", Console.escapingControlCharacters(row.name)]
    }

    private static func compactCells(_ row: Row) -> [String] {
        [String(row.id.prefix(row.prefixLength)), row.kind, row.compartment, Console.byteCount(row.size), minutes(row.created),
         row.expires.map(minutes) ?? "-", Console.escapingControlCharacters(row.name)]
    }

    /// "2026-11-26 09:53Z": the time to the minute, still UTC and still sortable.
    private static func minutes(_ date: Date) -> String {
        minutes(full: Timestamp.string(date, withFraction: false))
    }

    /// The width of `minutes(full:)`: three columns less for the usual 20-character form.
    private static func minutesWidth(full: String) -> Int {
        full.utf8.count == 20 ? 17 : DisplayWidth.of(minutes(full: full))
    }

    /// The same from the full form, 2026-11-26T09:53:38Z.
    private static func minutes(full: String) -> String {
        String(full.prefix(10)) + " " + String(full.dropFirst(11).prefix(5)) + "Z"
    }

    /// The length of the common prefix, in bytes (`zip(...).prefix { }` built an array of
    /// pairs per call).
    private static func common(_ a: String, _ b: String) -> Int {
        var x = a.utf8.makeIterator(), y = b.utf8.makeIterator()
        var count = 0
        while let p = x.next(), let q = y.next(), p == q { count += 1 }
        return count
    }

    static func encode(_ row: Row) -> [UInt8] {
        var writer = BinaryWriter(capacity: 96 + row.name.utf8.count)
        for text in [row.id, row.kind, row.compartment, row.name] {
            writer.integer(text.utf8.count)
            writer.append(Array(text.utf8))
        }
        writer.signedInteger(row.size)
        writer.integer(row.created.timeIntervalSinceReferenceDate.bitPattern)
        writer.integer(row.expires.map { $0.timeIntervalSinceReferenceDate.bitPattern + 1 } ?? 0)
        writer.integer(row.prefixLength)
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> Row {
        var reader = BinaryReader(bytes, what: "a spooled row")
        func text() throws -> String {
            let count = try reader.int(atMost: bytes.count, "length")
            return String(decoding: try reader.bytes(count), as: UTF8.self)
        }
        let (id, kind, compartment, name) = (try text(), try text(), try text(), try text())
        let size = try reader.signedInteger(in: Int64.min...Int64.max, "size")
        let created = Date(timeIntervalSinceReferenceDate: Double(bitPattern: try reader.integer(atMost: .max, "created")))
        let expires = try reader.integer(atMost: .max, "expires")
        let prefixLength = try reader.int(atMost: 36, "prefix")
        return Row(id: id, kind: kind, compartment: compartment, size: size, created: created,
                   expires: expires == 0 ? nil : Date(timeIntervalSinceReferenceDate: Double(bitPattern: expires - 1)),
                   name: name, prefixLength: prefixLength)
    }
}

extension ItemTable.Row {
    convenience init(_ item: ItemMetadata) {
        self.init(id: item.id, kind: item.kind.rawValue, compartment: item.compartment.rawValue, size: item.size,
                  created: item.created, expires: item.expires, name: item.name)
    }
}
