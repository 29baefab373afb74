import Foundation
import Glibc
import Testing
import N11TestSupport
@testable import N11Vault
import N11System
import N11Crypto

/// The committed key store fixtures (Fixtures/vectors/keystore, made by
/// Scripts/make-keystore-fixtures): each NAME.n11keys says in NAME.txt whether a reader loads it
/// (`success`) or refuses it (`refused`, as damage, before any PIN is asked for).
/// Scripts/format-reference.py --keystore-testkit reads the same files from FORMAT.md alone.
@Suite("Key store fixtures: what both readers accept and refuse (FORMAT.md, Appendix B)")
struct KeyStoreFixtureTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Fixtures/vectors/keystore").standardized.path

    static func fixtures() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasSuffix(".n11keys") }.map { String($0.dropLast(".n11keys".count)) }.sorted()
    }

    @Test func theFolderHoldsBothOutcomes() throws {
        let expects = Set(try Self.fixtures().map { try Self.expect($0) })
        #expect(expects == ["success", "refused"])
    }

    static func expect(_ name: String) throws -> String {
        let text = try String(contentsOfFile: directory + "/" + name + ".txt", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("expect: ") })
        return String(line.dropFirst("expect: ".count))
    }

    @Test(arguments: fixtures())
    func fixtureHasItsStatedOutcome(_ name: String) throws {
        let expected = try Self.expect(name)
        try withTemporaryDirectory { dir in
            let home = N11Home(root: dir + "/home")
            #expect(mkdir(home.root, 0o700) == 0)
            try writeBytes(try readBytes(Self.directory + "/" + name + ".n11keys"), to: home.keyStorePath)
            #expect(chmod(home.keyStorePath, 0o600) == 0)
            var asked = 0
            let pin = { () throws -> SecureBytes? in
                asked += 1
                return try SecureBytes(copying: Array("fixture-pin-2468".utf8))
            }
            switch expected {
            case "success":
                _ = try KeyStore.load(from: home, pin: pin)
            default:
                expectVaultError("keyStoreDamaged") { _ = try KeyStore.load(from: home, pin: pin) }
                #expect(asked == 0, "\(name): the PIN was asked for a store that is refused")
            }
        }
    }
}
