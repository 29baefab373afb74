import N11Crypto
import N11Format

/// The keys of one compartment (vault, fade or backup) over its rotations
/// (`vault rotate-keys`). Only `current` ever seals anything. Retired keys still open what
/// was sealed before a rotation: secure archives hold vault item files as they were, so one
/// made before a rotation needs the key of its time until the user asks to forget it.
struct CompartmentKeyRing {
    /// Seals every new item file and record of the compartment.
    var current: SecureBytes
    /// Keys that were current before a rotation, oldest first; read only.
    var retired: [SecureBytes] = []
    /// A key a rotation made and will promote when its journal commits. Until then nothing
    /// visible is sealed under it; a rotation that never committed leaves it behind, and the
    /// next rotation drops it.
    var pending: SecureBytes? = nil
    /// The IDs of keys forgotten (`--forget-retired`), oldest first: kept so that an archive
    /// that needs one is told so, rather than called damaged.
    var forgotten: [[UInt8]] = []

    /// Every key that may open something, the likeliest first: current, pending (a committed
    /// rotation not yet applied), then retired, newest first.
    var openingKeys: [SecureBytes] { [current] + (pending.map { [$0] } ?? []) + retired.reversed() }

    /// The key whose ID is `id`, if this ring holds it.
    func key(id: [UInt8]) throws -> SecureBytes? {
        try openingKeys.first { try Self.id(of: $0) == id }
    }

    /// The ID of the compartment's first key (the one every archive written before key IDs
    /// existed used): the oldest forgotten ID, else the oldest retired key's, else the current's.
    func originalID() throws -> [UInt8] {
        if let first = forgotten.first { return first }
        return try Self.id(of: retired.first ?? current)
    }

    static let idLabel = Array("n11archive/v1/compartment-key-id".utf8)

    /// A key's public name: the first 16 bytes of HMAC-SHA256(key, label). It names the key
    /// in secure archives' manifests and in the key store, and reveals nothing of it.
    static func id(of key: SecureBytes) throws -> [UInt8] {
        Array(try HMACSHA256.authenticate(idLabel, key: key).prefix(16))
    }
}
