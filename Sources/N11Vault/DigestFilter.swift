/// A Bloom filter of 64-bit digests in a fixed 4 MiB: "certainly not inserted" or "maybe".
/// `vault add`'s duplicate check asks it before its scratch database, whose index pages are
/// out of its cache for most random digests past a few hundred thousand items (issue 34).
/// Its memory does not grow with the items; it answers "maybe" for a quarter of the digests
/// never inserted at 10,000,000 inserted and for most past 30,000,000, and the database
/// answers those, as it answered all before. The digests are keyed SipHash outputs
/// (`ScratchDigest`), so their bits are already uniform: the four probes are taken from
/// them by double hashing, with no hash of their own.
struct DigestFilter {
    /// 2^25 bits: with four probes, about 1% "maybe" for a digest never inserted at
    /// 3,000,000 inserted, 0.02% at 1,000,000.
    private static let bitCountLog2 = 25
    private static let probes = 4
    private var words: [UInt64]

    init() {
        words = [UInt64](repeating: 0, count: 1 << (Self.bitCountLog2 - 6))
    }

    private static func bits(of digest: Int64) -> (first: UInt64, step: UInt64) {
        let value = UInt64(bitPattern: digest)
        return (value & 0xFFFF_FFFF, (value >> 32) | 1)
    }

    mutating func insert(_ digest: Int64) {
        let (first, step) = Self.bits(of: digest)
        let mask = UInt64(1 << Self.bitCountLog2) - 1
        for probe in 0..<UInt64(Self.probes) {
            let bit = (first &+ probe &* step) & mask
            words[Int(bit >> 6)] |= 1 << (bit & 63)
        }
    }

    func mayContain(_ digest: Int64) -> Bool {
        let (first, step) = Self.bits(of: digest)
        let mask = UInt64(1 << Self.bitCountLog2) - 1
        for probe in 0..<UInt64(Self.probes) {
            let bit = (first &+ probe &* step) & mask
            if words[Int(bit >> 6)] & (1 << (bit & 63)) == 0 { return false }
        }
        return true
    }
}
