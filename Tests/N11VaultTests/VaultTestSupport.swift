import Foundation
import Glibc
import Testing
import N11Crypto
import N11Format
import N11System
import N11TestSupport
import N11Vault

// Helpers shared by the key store and vault tests: file mode, truncation and tree helpers,
// homes and items, and a way to assert which VaultError case was thrown. Temp directories,
// file bytes, listings and CollectingSink come from N11TestSupport.

/// Permission bits of `path` (lstat), or nil if nothing is there.
func mode(of path: String) -> mode_t? {
    var st = stat()
    guard lstat(path, &st) == 0 else { return nil }
    return st.st_mode & 0o7777
}

func truncateFile(_ path: String, to length: Int) throws {
    guard truncate(path, off_t(length)) == 0 else { throw SystemError("truncate", path: path) }
}

/// Every regular file below `root`, recursively (hidden ones included).
func allFiles(under root: String) -> [String] {
    guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [] }
    var files: [String] = []
    while let relative = enumerator.nextObject() as? String {
        let full = root + "/" + relative
        var st = stat()
        if lstat(full, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG { files.append(full) }
    }
    return files
}

extension SecureBytes {
    /// The bytes copied out, for comparisons in tests only.
    var testBytes: [UInt8] { withUnsafeBytes { Array($0) } }
}

/// The name of an enum case, e.g. "keyStoreDamaged" for `.keyStoreDamaged(path:reason:)`.
func caseName(of error: VaultError) -> String {
    if let label = Mirror(reflecting: error).children.first?.label { return label }
    return "\(error)"
}

/// Runs `body` and checks that it throws the VaultError case named `expected`.
/// Returns the error so callers can check its message.
@discardableResult
func expectVaultError(_ expected: String, sourceLocation: SourceLocation = #_sourceLocation,
                      _ body: () throws -> Void) -> VaultError? {
    do {
        try body()
        Issue.record("expected VaultError.\(expected), but nothing was thrown", sourceLocation: sourceLocation)
        return nil
    } catch let error as VaultError {
        let name = caseName(of: error)
        #expect(name == expected, "expected VaultError.\(expected), got .\(name): \(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected VaultError.\(expected), got \(type(of: error)): \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// A home with a fresh unsealed key store inside `dir`.
func makeHome(in dir: String, name: String = "home", pin: SecureBytes? = nil) throws -> (N11Home, KeyStore) {
    let home = N11Home(root: dir + "/" + name)
    let store = try KeyStore.create(in: home, pin: pin)
    return (home, store)
}

func photo(_ bytes: [UInt8], name: String = "IMG_0001.jpg", compartment: Compartment = .vault,
           expires: Date? = nil) -> Vault.NewItem {
    Vault.NewItem(source: MemorySource(bytes), kind: .photo, name: name, compartment: compartment, expires: expires)
}

func note(_ text: String, name: String = "note", compartment: Compartment = .vault,
          expires: Date? = nil) -> Vault.NewItem {
    Vault.NewItem(source: MemorySource(Array(text.utf8)), kind: .note, name: name, compartment: compartment, expires: expires)
}

func plaintext(of item: ItemMetadata, in vault: Vault) throws -> [UInt8] {
    let sink = CollectingSink()
    try vault.read(item, into: sink)
    return sink.bytes
}


