/// The bounds of FORMAT.md §8, checked on declared values before anything is allocated.
public enum FormatLimits {
    /// The largest header of any version: version 3 adds the list of archives it depends on
    /// (DESIGN.md §8.3); version 2 headers carry the key slots within 16384 bytes, version 1
    /// headers stay within 4096.
    public static let headerBytes = 32768
    public static let headerBytesV2 = 16384
    public static let headerBytesV1 = 4096
    /// `header.sig` (version 3, signed archives): an Ed25519 signature.
    public static let signatureBytes = 64
    /// An Ed25519 public key (`signer`).
    public static let signerKeyBytes = 32
    public static let keyWrapBytes = 12 + 32 + 16
    /// `header.mac` (version 2): HMAC-SHA256 of the header.
    public static let headerMACBytes = 32
    public static let keySlots = 32
    /// Each password slot costs one Argon2id per wrong password.
    public static let passwordSlots = 4
    public static let manifestBytes: Int64 = 256 << 20
    public static let items = 1_000_000
    public static let itemSize: Int64 = 1 << 40
    public static let nameBytes = 255
    public static let chunkSize = 65536
    public static let chunkTag = 16
    /// What a vault item file adds to its plaintext (12-byte nonce, 16-byte tag): a secure
    /// archive's payload is the vault file, so it is this much longer than the item.
    public static let vaultFileOverhead: Int64 = 28
    /// A portable archive's Argon2id salt (FORMAT.md §3).
    public static let kdfSaltBytes = 16

    /// The payload length a sealed stream of `sealedLength` bytes carries, or nil if no
    /// payload produces that length (FORMAT.md §5: full chunks, then a final one of 16…65552).
    public static func payloadLength(sealedLength: Int64) -> Int64? {
        let full = Int64(chunkSize + chunkTag)
        guard sealedLength >= Int64(chunkTag) else { return nil }
        var chunks = sealedLength / full
        var rest = sealedLength % full
        if rest == 0 { chunks -= 1; rest = full }       // the final chunk is a full one
        guard rest >= Int64(chunkTag) else { return nil }
        if rest == Int64(chunkTag) && chunks > 0 { return nil }   // an empty final chunk after data
        return chunks * Int64(chunkSize) + rest - Int64(chunkTag)
    }

    /// Length of a sealed stream (FORMAT.md §5) for a payload of `payloadSize` bytes.
    public static func sealedLength(payloadSize: Int64) -> Int64 {
        let chunks = max(1, (payloadSize + Int64(chunkSize) - 1) / Int64(chunkSize))
        return payloadSize + chunks * Int64(chunkTag)
    }
}
