/// The three compartments of seed 003, each encrypted under its own key.
public enum Compartment: String, CaseIterable, Codable, Sendable {
    /// Permanent items.
    case vault
    /// Self-destructing items: every one has an expiry, after which it is never read as live.
    case fade
    /// The alternative vault (seed 003's "Backup PIN" vault).
    case backup
}

/// What an item is; decides its directory and file extension (seed 003 layout).
public enum ItemKind: String, Codable, Sendable {
    case photo
    case note

    public var directory: String { self == .photo ? "Photos" : "Notes" }
    public var fileExtension: String { self == .photo ? "n11" : "n11note" }
}
