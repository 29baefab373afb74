import Foundation
import Glibc
import Testing
import N11Crypto
import N11System
import N11Vault

// Helpers shared by the key store and vault tests: a private temp directory per test, file
// byte/mode helpers, and a way to assert which VaultError case was thrown.

/// Runs `body` with a fresh directory made by mkdtemp under /tmp, removed afterwards
/// (a closure rather than an object, so the directory cannot vanish while the body runs).
func withTemporaryDirectory<T>(_ body: (String) throws -> T) throws -> T {
    var template = Array("/tmp/n11vault-tests-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    guard made != nil else { throw SystemError("mkdtemp", path: "/tmp") }
    let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}

func readBytes(_ path: String) throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: path)))
}

func writeBytes(_ bytes: [UInt8], to path: String) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

/// Permission bits of `path` (lstat), or nil if nothing is there.
func mode(of path: String) -> mode_t? {
    var st = stat()
    guard lstat(path, &st) == 0 else { return nil }
    return st.st_mode & 0o7777
}

func exists(_ path: String) -> Bool {
    var st = stat()
    return lstat(path, &st) == 0
}

func fileSize(_ path: String) -> Int64? {
    var st = stat()
    guard lstat(path, &st) == 0 else { return nil }
    return Int64(st.st_size)
}

/// XORs one byte of a file in place.
func flipByte(in path: String, at offset: Int, mask: UInt8 = 0x01) throws {
    var bytes = try readBytes(path)
    bytes[offset] ^= mask
    try writeBytes(bytes, to: path)
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

/// Whether `needle` occurs anywhere in `haystack`.
func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return needle.isEmpty }
    let first = needle[0]
    var i = 0
    let last = haystack.count - needle.count
    while i <= last {
        if haystack[i] == first && haystack[i..<(i + needle.count)].elementsEqual(needle) { return true }
        i += 1
    }
    return false
}

func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
}

extension SecureBytes {
    /// The bytes copied out, for comparisons in tests only.
    var testBytes: [UInt8] { withUnsafeBytes { Array($0) } }
}

func pin(_ text: String) throws -> SecureBytes {
    try SecureBytes(copying: Array(text.utf8))
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

/// Collects what a vault read stages (tests only: a real sink keeps it out of sight).
final class CollectingSink: UnverifiedPlaintextSink {
    private(set) var bytes: [UInt8] = []
    func stage(_ chunk: ArraySlice<UInt8>) throws { bytes.append(contentsOf: chunk) }
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

func metadataPath(of item: ItemMetadata, in vault: Vault) -> String {
    vault.path + "/Meta/\(item.id).n11meta"
}
