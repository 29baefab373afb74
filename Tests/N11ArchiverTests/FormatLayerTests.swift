import Foundation
import Testing
import N11Format

@Suite("Format layer: sealed lengths, strict JSON, timestamps")
struct FormatLayerTests {
    @Test("payloadLength inverts sealedLength, and lengths no payload produces are refused")
    func sealedLengths() {
        for size: Int64 in [0, 1, 65535, 65536, 65537, 131072, 131073, 10_000_000] {
            #expect(FormatLimits.payloadLength(sealedLength: FormatLimits.sealedLength(payloadSize: size)) == size, "\(size)")
        }
        // Too short for a tag; a full chunk followed by an empty final chunk; a tail too short for a tag.
        for sealed: Int64 in [0, 15, 65552 + 16, 65552 + 15, 2 * 65552 + 3] {
            #expect(FormatLimits.payloadLength(sealedLength: sealed) == nil, "\(sealed)")
        }
    }

    static let header = #"{"archiveId":"00112233445566778899aabbccddeeff","chunkSize":65536,"created":"2026-11-21T22:40:00Z","format":"n11archive","mode":"secure","version":1}"#

    @Test("a well-formed header parses")
    func validHeader() throws {
        let parsed = try ArchiveHeader(parsing: Array(Self.header.utf8))
        #expect(parsed.mode == .secure && parsed.archiveIDHex == "00112233445566778899aabbccddeeff")
    }

    @Test("JSON that parsers disagree about is rejected",
          arguments: [
            #"{"archiveId":"00112233445566778899aabbccddeeff","version":1,"version":2"#,   // duplicate
            #""mode":"secure","m\u006fde":"portable""#,                                       // duplicate, escaped
            #""version":1.0"#,                                                              // not an integer
            #""version":1e0"#,
            #""version":01"#,
          ])
    func ambiguousJSON(_ change: String) {
        // Splice the change into an otherwise valid header.
        var text = Self.header
        if change.hasPrefix("{") {
            text = change + #","chunkSize":65536,"created":"2026-11-21T22:40:00Z","format":"n11archive","mode":"secure"}"#
        } else if change.hasPrefix(#""version""#) {
            text = text.replacingOccurrences(of: #""version":1"#, with: change)
        } else {
            text = text.replacingOccurrences(of: #""mode":"secure""#, with: change)
        }
        #expect(throws: FormatError.self, "\(text)") { try ArchiveHeader(parsing: Array(text.utf8)) }
    }

    @Test("a byte-order mark and deep nesting are rejected")
    func bomAndNesting() {
        #expect(throws: FormatError.self) { try ArchiveHeader(parsing: [0xEF, 0xBB, 0xBF] + Array(Self.header.utf8)) }
        let deep = String(repeating: "[", count: 40) + String(repeating: "]", count: 40)
        let nested = Self.header.replacingOccurrences(of: #""version":1"#, with: #""version":1,"x":"# + deep)
        #expect(throws: FormatError.self) { try ArchiveHeader(parsing: Array(nested.utf8)) }
    }

    @Test("timestamps: both forms round-trip exactly through whole milliseconds; malformed ones fail")
    func timestamps() throws {
        for text in ["2026-11-21T22:40:00Z", "2026-11-21T22:40:00.123Z", "1999-12-31T23:59:59.999Z", "2028-02-29T00:00:00.001Z"] {
            let date = try #require(Timestamp.parse(text), "\(text)")
            #expect(Timestamp.string(date) == text)
        }
        for text in ["2026-11-21T22:40:00", "2026-11-21 22:40:00Z", "2026-02-30T00:00:00Z", "2026-11-21T22:40:00.12Z",
                     "2026-11-21T24:00:00Z", "2026-11-21T22:40:00+00:00"] {
            #expect(Timestamp.parse(text) == nil, "\(text)")
        }
        let now = Date()
        let ms = Timestamp.milliseconds(now)
        #expect(Timestamp.milliseconds(try #require(Timestamp.parse(Timestamp.string(now)))) == ms)
    }

    @Test("a timestamp's order key sorts as the dates do, before and after 2001 and around zero")
    func timestampOrderKeys() {
        var generator = SystemRandomNumberGenerator()
        let fixed = [-1e12, -978_307_200.5, -1, -1e-9, -Double.leastNonzeroMagnitude, -0.0, 0, Double.leastNonzeroMagnitude, 1e-9, 0.001,
                     1, 978_307_200, 1e12].map { Date(timeIntervalSinceReferenceDate: $0) }
        let random = (0..<2_000).map { _ in Date(timeIntervalSinceReferenceDate: Double.random(in: -4e9...4e9, using: &generator)) }
        // Every pair of the fixed ones (neighbours around zero included), and random pairs.
        let pairs = fixed.flatMap { a in fixed.map { (a, $0) } } + Array(zip(random, random.shuffled(using: &generator)))
        for (a, b) in pairs {
            #expect((Timestamp.orderKey(a) < Timestamp.orderKey(b)) == (a < b), "\(a.timeIntervalSinceReferenceDate) \(b.timeIntervalSinceReferenceDate)")
            #expect((Timestamp.orderKey(a) == Timestamp.orderKey(b)) == (a == b), "\(a.timeIntervalSinceReferenceDate) \(b.timeIntervalSinceReferenceDate)")
        }
        #expect(Timestamp.orderKey(Date(timeIntervalSinceReferenceDate: -0.0)) == Timestamp.orderKey(Date(timeIntervalSinceReferenceDate: 0)))
    }

    @Test("timestamps without the fraction (vault list's column) read as ISO8601DateFormatter printed them")
    func timestampsWithoutFraction() {
        let formatter = ISO8601DateFormatter()
        var generator = SystemRandomNumberGenerator()
        let dates = [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_700_000_000.999)]
            + (0..<500).map { _ in Date(timeIntervalSince1970: Double(Int64.random(in: 0...4_102_444_800_000, using: &generator)) / 1000) }
        for date in dates {
            #expect(Timestamp.string(date, withFraction: false) == formatter.string(from: date), "\(date.timeIntervalSince1970)")
        }
    }
}
