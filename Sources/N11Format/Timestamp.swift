import Foundation
import Glibc

/// The format's timestamps (FORMAT.md, "JSON"): `YYYY-MM-DDTHH:MM:SSZ`, or with exactly three
/// fraction digits `YYYY-MM-DDTHH:MM:SS.sssZ` when the milliseconds are not zero. Converted
/// through whole milliseconds so that a time survives any number of round trips exactly.
public enum Timestamp {
    public static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    public static func date(milliseconds: Int64) -> Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }

    /// A number in the dates' order (unsigned order is time order; equal dates, equal numbers),
    /// for sorting by a key that costs no comparison of dates: the double's bits, the sign bit
    /// set for positive values and every bit flipped for negative ones. -0 and +0 are one time.
    public static func orderKey(_ date: Date) -> UInt64 {
        let seconds = date.timeIntervalSinceReferenceDate
        let bits = (seconds == 0 ? 0 : seconds).bitPattern
        return bits & (1 << 63) == 0 ? bits | (1 << 63) : ~bits
    }

    /// `withFraction: false` drops the milliseconds (the seconds are not rounded up): a
    /// table's column of times, as `ISO8601DateFormatter` printed them.
    public static func string(_ date: Date, withFraction: Bool = true) -> String {
        let ms = milliseconds(date)
        var seconds = time_t(ms >= 0 ? ms / 1000 : (ms - 999) / 1000)
        let fraction = ms - Int64(seconds) * 1000
        var parts = tm()
        gmtime_r(&seconds, &parts)
        // Digits written into bytes: `vault list` prints one of these per item.
        var text: [UInt8] = []
        text.reserveCapacity(24)
        func digits(_ value: Int64, _ width: Int) {
            var divisor: Int64 = 1
            for _ in 1..<width { divisor *= 10 }
            var v = value
            if v < 0 || v >= divisor * 10 { text.append(contentsOf: String(v).utf8); return }
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(v / divisor))
                v %= divisor
                divisor /= 10
            }
        }
        digits(Int64(parts.tm_year) + 1900, 4); text.append(UInt8(ascii: "-"))
        digits(Int64(parts.tm_mon) + 1, 2); text.append(UInt8(ascii: "-"))
        digits(Int64(parts.tm_mday), 2); text.append(UInt8(ascii: "T"))
        digits(Int64(parts.tm_hour), 2); text.append(UInt8(ascii: ":"))
        digits(Int64(parts.tm_min), 2); text.append(UInt8(ascii: ":"))
        digits(Int64(parts.tm_sec), 2)
        if withFraction && fraction != 0 {
            text.append(UInt8(ascii: "."))
            digits(fraction, 3)
        }
        text.append(UInt8(ascii: "Z"))
        return String(decoding: text, as: UTF8.self)
    }

    /// Parses exactly the two forms above; nil for anything else.
    public static func parse(_ text: String) -> Date? {
        let b = Array(text.utf8)
        guard b.count == 20 || b.count == 24, b.last == UInt8(ascii: "Z") else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var v: Int32 = 0
            for i in range {
                guard b[i] >= UInt8(ascii: "0"), b[i] <= UInt8(ascii: "9") else { return nil }
                v = v * 10 + Int32(b[i] - UInt8(ascii: "0"))
            }
            return v
        }
        for (i, c) in [(4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":")] as [(Int, Unicode.Scalar)] where b[i] != UInt8(ascii: c) { return nil }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60 else { return nil }
        var fraction: Int32 = 0
        if b.count == 24 {
            guard b[19] == UInt8(ascii: "."), let f = number(20..<23) else { return nil }
            fraction = f
        } else if b[19] != UInt8(ascii: "Z") {
            return nil
        }
        var parts = tm()
        parts.tm_year = year - 1900; parts.tm_mon = month - 1; parts.tm_mday = day
        parts.tm_hour = hour; parts.tm_min = minute; parts.tm_sec = second
        let seconds = timegm(&parts)
        // timegm normalises impossible dates (Feb 30); refuse them instead.
        guard parts.tm_mday == day, parts.tm_mon == month - 1 else { return nil }
        return date(milliseconds: Int64(seconds) * 1000 + Int64(fraction))
    }
}
