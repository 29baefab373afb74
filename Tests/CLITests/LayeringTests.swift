import Foundation
import Testing

/// DESIGN.md §2's layering, checked on the sources. SwiftPM lets a target import any module of
/// its dependency closure, so the dependency lists in Package.swift cannot keep the CLI off
/// N11Container, the C libraries or libc: this suite does.
@Suite("Layering: which module may import which, and what stays out of the CLI")
struct LayeringTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// What each module may import (besides the standard library and Foundation).
    static let allowed: [String: Set<String>] = [
        "N11System": ["Glibc", "Synchronization", "CLinux"],
        "N11Crypto": ["Glibc", "Synchronization", "CSodium", "CLibCrypto", "N11System"],
        "N11Format": ["Glibc", "N11System"],
        "N11Container": ["Glibc", "CZip", "N11System"],
        "N11Vault": ["Glibc", "Synchronization", "CSQLite", "N11Crypto", "N11Format", "N11System"],
        "N11Archiver": ["Glibc", "Synchronization", "N11Vault", "N11Crypto", "N11Format", "N11Container", "N11System"],
        // The CLI: parsing, one use case per command, rendering. No libc, no C library, no ZIP.
        "n11archive": ["ArgumentParser", "N11Archiver", "N11Vault", "N11Crypto", "N11Format", "N11System"],
    ]

    /// The Swift files of a module's sources, with their text.
    static func sources(of module: String) throws -> [(name: String, text: String)] {
        let dir = root + "/Sources/" + module
        return try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".swift") }.sorted().map {
            ($0, try String(contentsOfFile: dir + "/" + $0, encoding: .utf8))
        }
    }

    /// `import X` lines: the module and whether the import is `internal` (kept out of the API).
    static func imports(in text: String) -> [(module: String, isInternal: Bool)] {
        text.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ").map(String.init).filter { !$0.hasPrefix("@") }
            guard let at = words.firstIndex(of: "import"), at + 1 < words.count,
                  words[..<at].allSatisfy({ ["internal", "public", "private", "fileprivate", "package"].contains($0) }) else { return nil }
            return (words[at + 1], words[..<at].contains("internal"))
        }
    }

    @Test("every module imports only the layers below it, and the CLI no libc, C library or ZIP container")
    func importsFollowTheLayers() throws {
        for (module, allowed) in Self.allowed {
            let files = try Self.sources(of: module)
            #expect(!files.isEmpty, "no sources found for \(module)")
            for (name, text) in files {
                for imported in Self.imports(in: text) where imported.module != "Foundation" {
                    #expect(allowed.contains(imported.module), "\(module)/\(name) imports \(imported.module)")
                }
            }
        }
    }

    @Test("SQLite, libzip and the Linux shim are imported `internal`: no layer above their owner sees them")
    func cLibrariesStayInside() throws {
        for (module, library) in [("N11Vault", "CSQLite"), ("N11Container", "CZip"), ("N11System", "CLinux")] {
            for (name, text) in try Self.sources(of: module) {
                for imported in Self.imports(in: text) where imported.module == library {
                    #expect(imported.isInternal, "\(module)/\(name): `import \(library)` is not internal")
                }
            }
        }
    }

    @Test("the CLI does no file work of its own and parses no remote locations (ArchiveStores does, once)")
    func cliStaysThin() throws {
        let forbidden = ["FileManager", "fopen(", "Glibc.", "RemotePath.parse", "RemotePath(", "opendir(", "unlink(", "rename("]
        for (name, text) in try Self.sources(of: "n11archive") {
            for word in forbidden {
                #expect(!text.contains(word), "n11archive/\(name) uses \(word)")
            }
        }
    }
}
