import Foundation
import Glibc
import Testing
import N11TestSupport

// Bounded memory of create, verify and restore, measured in the child that does the work.
// An in-process measurement (VmHWM of the test runner) also counts every other suite that
// runs meanwhile, and failed now and then for that reason alone; a child's VmHWM is its own.

@Suite("n11archive CLI: create, verify and restore of a 256 MiB item in bounded memory")
struct ArchiveMemoryTests {
    /// Argon2id (8 MiB with `fastKDF`) plus buffers of a few MiB. Holding the item even once
    /// would add 256 MiB.
    static let allowedGrowthKiB = 24 << 10

    @Test("each command's peak RSS stays within 24 MiB of a one-byte vault add: portable, secure, and a key rotation",
          .timeLimit(.minutes(5)))
    func boundedMemory() throws {
        try withSandbox { s in
            try s.initialize()
            let small = try s.run(["vault", "add", try s.file("small.jpg", [1])])
            expectExit(small, 0)
            let baseline = try #require(small.peakRSSKiB, "no memory sample of the baseline vault add")

            // Random content, so that nothing in the path can shrink it; written in 1 MiB steps.
            let input = s.path("huge.raw")
            let fd = open(input, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            #expect(fd >= 0)
            let random = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
            #expect(random >= 0)
            defer { close(random) }
            var block = [UInt8](repeating: 0, count: 1 << 20)
            for _ in 0..<256 {
                #expect(block.withUnsafeMutableBytes { read(random, $0.baseAddress, $0.count) } == block.count)
                #expect(block.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == block.count)
            }
            close(fd)
            let added = try s.run(["vault", "add", input])
            expectExit(added, 0)
            let id = try #require(addedLines(added).first?.id, "\(added)")

            var peaks: [(String, Int)] = []
            func measure(_ step: String, _ arguments: [String], environment: [String: String] = [:]) throws {
                let run = try s.run(arguments, environment: environment)
                expectExit(run, 0)
                if arguments.contains("--progress") { #expect(run.err.contains("rotate"), "progress lines: \(run)") }
                peaks.append((step, try #require(run.peakRSSKiB, "no memory sample of \(step)")))
            }
            let pw = try s.passwordFile()
            let portable = s.path("portable.nu11vlt"), secure = s.path("secure.nu11vlt")
            try measure("create --portable", ["create", "--portable", "-o", portable, "--password-file", pw] + fastKDF)
            try measure("create --secure", ["create", "--secure", "-o", secure])
            try measure("verify portable", ["verify", portable, "--password-file", pw])
            try measure("verify secure", ["verify", secure])
            // A key rotation seals the item anew in the same bounded buffers; the secure
            // archive made before it is then restored through its retired key (sealed anew
            // again, under the current one).
            try measure("vault rotate-keys", ["vault", "rotate-keys", "--progress"])
            // Portable: into a new home. Secure: the same key store, once the item is gone.
            let elsewhere = ["N11_HOME": s.path("elsewhere")]
            try measure("restore portable", ["restore", portable, "--password-file", pw], environment: elsewhere)
            expectExit(try s.run(["vault", "rm", id]), 0)
            expectExit(try s.run(["vault", "purge"]), 0)
            try measure("restore secure", ["restore", secure])

            for (step, peak) in peaks {
                #expect(peak - baseline < Self.allowedGrowthKiB,
                        "\(step) peaked at \(peak) KiB, a one-byte vault add at \(baseline) KiB")
            }
            print("peak RSS (KiB): vault add 1 B \(baseline), " + peaks.map { "\($0.0) \($0.1)" }.joined(separator: ", "))

            // Both restores hold the original bytes.
            for home in [s.home, s.path("elsewhere")] {
                let out = s.path("out-\(home.hashValue).raw")
                expectExit(try s.run(["vault", "cat", id, "-o", out], environment: ["N11_HOME": home]), 0)
                #expect(sameContent(out, input), "restored into \(home)")
                unlink(out)
            }
            unlink(input)
        }
    }
}

/// Whether two files hold the same bytes, compared 1 MiB at a time.
private func sameContent(_ a: String, _ b: String) -> Bool {
    let fa = open(a, O_RDONLY | O_CLOEXEC), fb = open(b, O_RDONLY | O_CLOEXEC)
    defer { if fa >= 0 { close(fa) }; if fb >= 0 { close(fb) } }
    guard fa >= 0, fb >= 0 else { return false }
    var ba = [UInt8](repeating: 0, count: 1 << 20), bb = ba
    while true {
        let na = ba.withUnsafeMutableBytes { read(fa, $0.baseAddress, $0.count) }
        let nb = bb.withUnsafeMutableBytes { read(fb, $0.baseAddress, $0.count) }
        guard na == nb, na >= 0 else { return false }
        if na == 0 { return true }
        if memcmp(ba, bb, na) != 0 { return false }
    }
}
