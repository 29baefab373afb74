/// The one vocabulary of items that the vault, the archive format and export share: an
/// archive stores the same names the vault does, and an item's kind decides its folder
/// everywhere (vault `Photos/`, archive entry `Photos/…`, export `DIR/Photos/`).

/// The three compartments of seed 003, each encrypted under its own key.
public enum Compartment: String, CaseIterable, Codable, Sendable {
    /// Permanent items.
    case vault
    /// Self-destructing items: every one has an expiry, after which it is never read as live.
    case fade
    /// The alternative vault (seed 003's "Backup PIN" vault).
    case backup
}

/// What an item is; decides its folder and file extension (seed 003 layout).
public enum ItemKind: String, CaseIterable, Codable, Sendable {
    case photo
    case note

    /// The folder of this kind's items: in the vault, in an archive, and in an export.
    public var directory: String { self == .photo ? "Photos" : "Notes" }
    /// The extension of a sealed item file of this kind (vault file and archive entry).
    public var fileExtension: String { self == .photo ? "n11" : "n11note" }
    /// `Photos/{ID}.n11` or `Notes/{ID}.n11note`: the path in the vault and the entry name in an archive.
    public func relativePath(id: String) -> String { "\(directory)/\(id).\(fileExtension)" }
}
