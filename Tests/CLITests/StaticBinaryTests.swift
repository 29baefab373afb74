import Foundation
import Glibc
import Testing
import N11TestSupport

// After losing a machine, a user restores with a copied binary on a machine without Swift.
// `Scripts/install` (and `Scripts/test`, into .build-static) builds it with
// --static-swift-stdlib; here that binary runs in a mount namespace where the Swift
// toolchain's directory is an empty tmpfs, so the loader cannot find a Swift library even
// by an absolute RUNPATH: a round trip (init, add, create, restore, cat) must still work.

/// The self-contained binary: $N11_STATIC_BINARY (Scripts/test sets it).
private let staticBinary = ProcessInfo.processInfo.environment["N11_STATIC_BINARY"] ?? ""

/// Where the Swift toolchain is: two levels above the `swift` on PATH (…/usr/bin/swift).
private let toolchainRoot: String? = {
    for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") + ["/opt/swift/usr/bin"] {
        let swift = "\(directory)/swift"
        if FileManager.default.isExecutableFile(atPath: swift) {
            let resolved = URL(fileURLWithPath: swift).resolvingSymlinksInPath()
            return resolved.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        }
    }
    return nil
}()

private let canHideToolchain: Bool = {
    guard geteuid() == 0, toolchainRoot != nil, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else { return false }
    return (try? runShell("unshare --mount --propagation private true"))?.status == 0
}()

@Suite("The self-contained binary",
       .enabled(if: !staticBinary.isEmpty, "set N11_STATIC_BINARY to the --static-swift-stdlib build (Scripts/test does)"))
struct StaticBinaryTests {

    @Test("it links no Swift library: only libc, libsodium, libcrypto, libzip and libsqlite3 (and what they need)")
    func linkedLibraries() throws {
        let (ldd, status) = try runShell("ldd '\(staticBinary)'")
        #expect(status == 0, "\(ldd)")
        #expect(!ldd.contains("libswift") && !ldd.contains("libFoundation") && !ldd.contains("not found"), "\(ldd)")
        for needed in ["libsodium", "libcrypto", "libzip", "libsqlite3"] { #expect(ldd.contains(needed), "\(needed): \(ldd)") }
        if let toolchainRoot { #expect(!ldd.contains(toolchainRoot), "\(ldd)") }
    }

    @Test("with the Swift toolchain hidden it restores what it archived, byte for byte",
          .enabled(if: canHideToolchain, "needs root and unshare to hide the toolchain in a mount namespace (CI has both)"))
    func roundTripWithoutSwift() throws {
        try withSandbox { s in
            let photo = try s.file("photo.jpg", randomBytes(200_000))
            let password = try s.passwordFile()
            let script = """
            set -e
            mount -t tmpfs tmpfs '\(toolchainRoot!)'
            test -z "$(ls -A '\(toolchainRoot!)')"
            bin='\(staticBinary)'
            "$bin" --version
            export N11_HOME='\(s.path("home-a"))'
            "$bin" init
            "$bin" vault add '\(photo)'
            "$bin" create --portable -o '\(s.path("a.nu11vlt"))' --password-file '\(password)' --kdf-ops 1 --kdf-memory 8
            export N11_HOME='\(s.path("home-b"))'
            "$bin" restore '\(s.path("a.nu11vlt"))' --password-file '\(password)'
            "$bin" vault cat photo.jpg -o '\(s.path("back.jpg"))'
            echo round-trip-done
            """
            let (output, status) = try runShell("unshare --mount --propagation private sh -c '\(script.replacingOccurrences(of: "'", with: "'\\''"))'")
            #expect(status == 0 && output.contains("round-trip-done"), "\(output)")
            #expect(try readBytes(s.path("back.jpg")) == readBytes(photo))
        }
    }
}
