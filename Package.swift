// swift-tools-version:6.0
// n11archive: an encrypted vault of photos and notes, backed up to .nu11vlt archives.
// Layers (DESIGN.md §2), lowest first: C system libraries → N11System (POSIX) and
// N11Crypto → N11Format, N11Container → N11Vault → N11Archiver → the n11archive CLI.
import PackageDescription

let package = Package(
    name: "n11archive",
    products: [
        .executable(name: "n11archive", targets: ["n11archive"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // C libraries, found by pkg-config; Swift never sees them above N11Crypto/N11Container.
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium",
                       providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CLibCrypto", pkgConfig: "libcrypto",
                       providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CZip", pkgConfig: "libzip",
                       providers: [.apt(["libzip-dev"])]),
        // The vault catalogue (N11Vault/VaultCatalogue): one transactional file of item records.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),

        .systemLibrary(name: "CLinux"),
        .target(name: "N11System", dependencies: ["CLinux"]),
        .target(name: "N11Crypto", dependencies: ["CSodium", "CLibCrypto", "N11System"]),
        .target(name: "N11Format", dependencies: ["N11System"]),
        .target(name: "N11Container", dependencies: ["CZip", "N11System"]),
        // The catalogue's SQLite is the vault's alone (`internal import`): no layer above sees it.
        .target(name: "N11Vault", dependencies: ["CSQLite", "N11Crypto", "N11Format", "N11System"]),
        .target(name: "N11Archiver",
                dependencies: ["N11Vault", "N11Crypto", "N11Format", "N11Container", "N11System"]),
        // The CLI: what it may import of these is checked by LayeringTests (SwiftPM would let
        // it import anything in this closure, C modules included).
        .executableTarget(
            name: "n11archive",
            dependencies: [
                "N11Archiver", "N11Vault", "N11Format", "N11Crypto", "N11System",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),

        .target(name: "N11TestSupport", dependencies: ["N11System", "N11Crypto", "N11Vault"], path: "Tests/Support"),
        // libFuzzer target over the archive reader (Scripts/fuzz); without -DFUZZING it
        // replays inputs, which is how Scripts/test checks the regression fixtures.
        .executableTarget(
            name: "n11fuzz",
            dependencies: ["CLinux", "N11Archiver", "N11Vault", "N11Format", "N11Crypto", "N11System"],
            path: "Sources/N11Fuzz"),

        .testTarget(name: "N11SystemTests", dependencies: ["N11System", "N11TestSupport"]),
        .testTarget(name: "N11CryptoTests", dependencies: ["N11Crypto", "N11System"],
                    resources: []),
        .testTarget(name: "N11VaultTests", dependencies: ["N11Vault", "N11Format", "N11Crypto", "N11System", "N11TestSupport"]),
        .testTarget(name: "CLITests", dependencies: ["N11System", "N11TestSupport"]),
        .testTarget(name: "N11ArchiverTests", dependencies: ["N11Archiver", "N11Vault", "N11Format", "N11Container", "N11Crypto", "N11System", "N11TestSupport"]),
    ]
)
