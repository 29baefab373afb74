import Foundation
internal import CLinux
import Glibc
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11Vault

/// A libFuzzer target over everything that reads untrusted archive bytes (Scripts/fuzz).
/// The first byte picks what the rest is fed to:
///   0  `header.json` bytes → ArchiveHeader(parsing:)
///   1  decrypted manifest bytes → Manifest(parsing:) against a fixed header
///   3  a version 3 manifest page's plaintext → ManifestPage.parse
///   4  a version 3 root's plaintext → ManifestRoot(parsing:)
///   2, 5+ a whole `.nu11vlt` file → open, unlock (password "fuzz"), verify, restore into a
///      throwaway vault, export into a throwaway directory
/// Every outcome but a crash, a hang or a sanitizer report is fine: the point is that bad
/// input only ever produces errors.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let selector = data[0]
    let rest = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    switch selector {
    case 0: _ = try? ArchiveHeader(parsing: rest)
    case 1: _ = try? Manifest(parsing: rest, header: FuzzWorld.shared.header)
    case 3: _ = try? ManifestPage.parse(rest, mode: .portable, dependencies: 2, what: "page")
    case 4: _ = try? ManifestRoot(parsing: rest, mode: .secure, dependencies: 2)
    default: FuzzWorld.shared.archive(rest)
    }
    return 0
}

/// State kept across inputs: a key store and scratch paths in one private directory.
final class FuzzWorld: @unchecked Sendable {
    static let shared = FuzzWorld()

    let root: String
    let keyStore: KeyStore
    let header: ArchiveHeader
    let password: SecureBytes

    init() {
        var template = Array("/tmp/n11fuzz-XXXXXX".utf8CString)
        _ = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        root = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        // Failing to set up is a broken machine, not a finding: stop loudly.
        guard let store = try? KeyStore.create(in: N11Home(root: root + "/home"), pin: nil),
              // Fixed, so a manifest seed can match it (Fixtures/fuzz/manifest-*).
              let header = try? ArchiveHeader(mode: .secure, archiveID: [UInt8](repeating: 7, count: 16),
                                              created: Date(timeIntervalSince1970: 1_767_225_600), kdf: nil),
              let password = try? SecureBytes(copying: Array("fuzz".utf8)) else {
            FileHandle.standardError.write(Data("n11fuzz: cannot set up in \(root)\n".utf8))
            exit(2)
        }
        keyStore = store
        self.header = header
        self.password = password
    }

    func archive(_ bytes: [UInt8]) {
        let path = root + "/input.nu11vlt"
        guard (try? AtomicFile.write(bytes, to: path)) != nil else { return }
        // A salvage's local-header scan (FORMAT.md §1.1) reads what libzip refuses: every
        // input goes through it too, and through everything after it when libzip refused.
        let salvaged = try? ArchiveReader(path: path, salvaging: true)
        guard let reader = (try? ArchiveReader(path: path)) ?? salvaged else { return }
        // Keep the fuzzer fast: only cheap key derivations are attempted (the bounds checks
        // themselves ran in ArchiveReader above, whatever the parameters).
        if reader.header.passwordKDFs.contains(where: { $0.memoryKiB > 1024 || $0.opsLimit > 1 }) { return }
        guard let archive = try? reader.unlock(password: { self.password }, keyStore: { self.keyStore },
                                               toleratingMissingItems: reader.salvaging) else { return }
        _ = try? ArchiveVerifier.verify(archive, keyStore: keyStore)
        let vaultPath = root + "/vault", exportPath = root + "/export"
        if let vault = try? Vault.open(at: vaultPath, keyStore: keyStore, forWriting: true) {
            _ = try? ArchiveRestorer.restore(archive, into: vault, .init(overwrite: true, dryRun: false))
        }
        _ = try? ArchiveExporter.export(archive, to: exportPath, keyStore: keyStore, .init(overwrite: true, dryRun: false))
        try? FileManager.default.removeItem(atPath: vaultPath)
        try? FileManager.default.removeItem(atPath: exportPath)
    }
}

#if FUZZING
/// SwiftPM links an executable's entry point as `<name>_main`; under libFuzzer that entry
/// point hands the process to libFuzzer's driver with `fuzzOne` as the target.
@_cdecl("n11fuzz_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { data, size in
        guard let data else { return 0 }
        return fuzzOne(data, size)
    }
}
#else
/// Without libFuzzer: replay inputs (the regression fixtures in Fixtures/fuzz) through the
/// same entry point, so `Scripts/test` checks every past finding in the ordinary build.
@main
struct Replay {
    static func main() {
        var count = 0
        for path in CommandLine.arguments.dropFirst() {
            guard let bytes = FileManager.default.contents(atPath: path) else {
                FileHandle.standardError.write(Data("n11fuzz: cannot read \(path)\n".utf8))
                exit(1)
            }
            let input = Array(bytes)
            input.withUnsafeBufferPointer { buffer in
                if let base = buffer.baseAddress { _ = fuzzOne(base, buffer.count) }
            }
            count += 1
        }
        print("n11fuzz: replayed \(count) input(s) without a crash")
        try? FileManager.default.removeItem(atPath: FuzzWorld.shared.root)
    }
}
#endif
