import Foundation
import N11Crypto
import N11System

/// Items being restored into a vault, written out of sight in `.n11staging-XXXX/` inside the
/// vault (same file system, so publishing is a rename) and made visible only by `commit()`,
/// after the caller has verified everything. Staged files are ciphertext under the vault's
/// keys, never plaintext. A staging directory left by a killed run is removed by the next
/// process that opens the vault for writing.
public final class VaultStaging {
    static let prefix = ".n11staging-"

    public let vault: Vault
    public let directory: String
    private var staged: [(metadata: ItemMetadata, content: String, meta: String, replaces: ItemMetadata?)] = []
    private var finished = false

    public init(vault: Vault) throws(VaultError) {
        precondition(vault.isWritable, "staging needs the vault opened for writing")
        self.vault = vault
        directory = Path.join(vault.path, Self.prefix + SecureRandom.bytes(6).hexString)
        do { try Directory.ensure(directory, mode: 0o700) } catch { throw VaultError.wrap(error) }
    }

    deinit { if !finished { discard() } }

    /// What a staged item will be; the content tag comes from writing it.
    public struct Description {
        public let id: String, kind: ItemKind, compartment: Compartment, name: String
        public let created: Date, expires: Date?, size: Int64, sha256: String
        public init(id: String, kind: ItemKind, compartment: Compartment, name: String, created: Date,
                    expires: Date?, size: Int64, sha256: String) {
            self.id = id; self.kind = kind; self.compartment = compartment; self.name = name
            self.created = created; self.expires = expires; self.size = size; self.sha256 = sha256
        }
    }

    /// Stages one item. `writeContent` writes the vault file (nonce ‖ ciphertext ‖ tag under
    /// the compartment's key) and returns its tag. `replaces` is the live item it will replace.
    public func stage(_ item: Description, replaces: ItemMetadata?,
                      writeContent: (FileDescriptor, SecureBytes) throws -> [UInt8]) throws {
        let key = vault.keyStore.key(for: item.compartment)
        let contentPath = Path.join(directory, "\(item.id).content")
        let content = try FileDescriptor.createExclusive(contentPath, mode: 0o600)
        let tag = try writeContent(content, key)
        try content.sync()
        try content.close()
        let metadata = ItemMetadata(id: item.id, kind: item.kind, compartment: item.compartment, name: item.name,
                                    created: item.created, expires: item.expires, size: item.size,
                                    contentTag: tag.hexString, sha256: item.sha256)
        let metaPath = Path.join(directory, "\(item.id).meta")
        let meta = try FileDescriptor.createExclusive(metaPath, mode: 0o600)
        try meta.write(metadata.sealed(with: key))
        try meta.sync()
        try meta.close()
        staged.append((metadata, contentPath, metaPath, replaces))
    }

    public var count: Int { staged.count }

    /// Publishes every staged item: content first, then the metadata that makes it exist.
    public func commit() throws(VaultError) {
        precondition(!finished)
        finished = true
        do {
            for item in staged {
                if let old = item.replaces, old.relativePath != item.metadata.relativePath {
                    try? Directory.removeFile(vault.contentPath(of: old))
                }
                guard rename(item.content, vault.contentPath(of: item.metadata)) == 0 else {
                    throw SystemError("cannot move a restored item into place", path: vault.contentPath(of: item.metadata))
                }
                guard rename(item.meta, vault.metadataPath(id: item.metadata.id)) == 0 else {
                    throw SystemError("cannot move a restored item into place", path: vault.metadataPath(id: item.metadata.id))
                }
            }
            for sub in [ItemKind.photo.directory, ItemKind.note.directory, Vault.metaDirectory] {
                try Directory.sync(Path.join(vault.path, sub))
            }
            Self.removeDirectory(directory)
            vault.forgetCachedItems()
        } catch { throw VaultError.wrap(error) }
    }

    /// Throws everything staged away; the vault is as it was.
    public func discard() {
        finished = true
        Self.removeDirectory(directory)
    }

    static func removeDirectory(_ path: String) {
        for name in (try? Directory.entries(of: path)) ?? [] { unlink(Path.join(path, name)) }
        rmdir(path)
    }

    static func removeLeftovers(in vaultPath: String) {
        for name in (try? Directory.entries(of: vaultPath)) ?? [] where name.hasPrefix(prefix) {
            removeDirectory(Path.join(vaultPath, name))
        }
    }
}

import Glibc
