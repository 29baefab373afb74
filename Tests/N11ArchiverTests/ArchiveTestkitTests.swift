import Foundation
import Glibc
import Testing
import N11Archiver
import N11Crypto
import N11System
import N11TestSupport
import N11Vault

/// The committed fixtures of Fixtures/vectors/archive (made by Scripts/make-archive-fixtures,
/// in the style of age's testkit): every NAME.nu11vlt states in NAME.txt what a reader must
/// make of it. Scripts/format-reference.py --testkit runs the same files, so the two readers
/// are held to one list. A new fixture needs no code here.
@Suite("Archive testkit fixtures")
struct ArchiveTestkitTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Fixtures/vectors/archive").standardized.path
    static let items = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Fixtures/golden/items").standardized.path

    struct Fixture: CustomStringConvertible, Sendable {
        let name: String
        let fields: [String: String]
        var description: String { name }
        var path: String { ArchiveTestkitTests.directory + "/" + name + ".nu11vlt" }
    }

    static func fixtures() -> [Fixture] {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasSuffix(".nu11vlt") }.map { String($0.dropLast(".nu11vlt".count)) }.sorted()
        return names.map { name in
            let text = (try? String(contentsOfFile: directory + "/" + name + ".txt", encoding: .utf8)) ?? ""
            var fields: [String: String] = [:]
            for line in text.split(separator: "\n") {
                guard let colon = line.range(of: ": ") else { continue }
                fields[String(line[..<colon.lowerBound])] = String(line[colon.upperBound...])
            }
            return Fixture(name: name, fields: fields)
        }
    }

    @Test func theFolderHoldsEveryKindOfOutcome() {
        let outcomes = Set(Self.fixtures().compactMap { $0.fields["expect"] })
        #expect(outcomes == ["success", "header failure", "key failure", "manifest failure", "payload failure"])
        #expect(Self.fixtures().count >= 20)
    }

    /// Opens, unlocks and verifies; the outcome is named by the step that refused: the
    /// header (and every slot's structure), the key (a slot opening and, in version 2,
    /// `header.mac`), the manifest, an item's payload. `password-file:` and `identity:` say
    /// what the reader is given (either may be absent).
    static func outcome(of fixture: Fixture, export: String) throws -> (String, ArchiveError?) {
        var secret: SecureBytes? = nil
        if let passwordFile = fixture.fields["password-file"] {
            var password = try readBytes(directory + "/" + passwordFile)
            if password.last == 0x0A { password.removeLast() }
            secret = try SecureBytes(copying: password)
        }
        let identities = try fixture.fields["identity"].map {
            [try KeyFiles.identity(inFile: directory + "/" + $0) { throw VaultError.notInitialized(home: "no passphrase") }]
        } ?? []
        let reader: ArchiveReader
        do { reader = try ArchiveReader(path: fixture.path) } catch { return ("header failure", error) }
        let noKeyStore: () throws -> KeyStore = { throw VaultError.notInitialized(home: "none") }
        // A signature that fails is found on opening and refused before any slot is tried
        // (FORMAT.md §10.7, step 2): a header failure, whatever the reader is given.
        if reader.signature == .invalid {
            do { _ = try reader.authenticate(password: { secret }, keyStore: noKeyStore, identities: { identities }) }
            catch { return ("header failure", error) }
            return ("success", nil)
        }
        do {
            _ = try reader.authenticate(password: { secret }, keyStore: noKeyStore, identities: { identities })
        } catch { return ("key failure", error) }
        let archive: UnlockedArchive
        do {
            archive = try reader.unlock(password: { secret }, keyStore: noKeyStore, identities: { identities })
        } catch { return ("manifest failure", error) }
        do {
            _ = try ArchiveVerifier.verify(archive, keyStore: nil)
            _ = try ArchiveExporter.export(archive, to: export, keyStore: nil)
        } catch { return ("payload failure", error) }
        return ("success", nil)
    }

    @Test(arguments: fixtures())
    func fixtureHasItsStatedOutcome(_ fixture: Fixture) throws {
        let expected = try #require(fixture.fields["expect"], "\(fixture.name).txt has no expect: line")
        try withTemporaryDirectory { dir in
            let (outcome, error) = try Self.outcome(of: fixture, export: dir + "/export")
            #expect(outcome == expected, "\(fixture.name): \(error.map { "\($0)" } ?? "accepted")")
            if let error {
                // Refusals are reported as what they are, never as an I/O failure.
                #expect([.damaged, .authentication].contains(error.kind), "\(fixture.name): \(error)")
            }
            if outcome == "success" {
                #expect(try readBytes(dir + "/export/Notes/note.txt") == readBytes(Self.items + "/note.txt"))
                #expect(try readBytes(dir + "/export/Photos/photo.jpg") == readBytes(Self.items + "/photo.jpg"))
            } else {
                #expect(!FileManager.default.fileExists(atPath: dir + "/export"), "nothing exported")
            }
        }
    }

    static var salvageFixtures: [Fixture] { fixtures().filter { $0.fields["salvage"] != nil } }

    /// A fixture's `salvage:` line (FORMAT.md §1.1, §10.8): what a salvage makes of an archive
    /// every reader refuses. `success`: every item found by its local header, verified and
    /// exported. `partial`: the same, from a copy cut short before its manifest's root, which
    /// a salvage reports as partial (what the archive held beyond its pages is not known);
    /// with a `lost-pages:` line, from an archive whose root is there but whose listed pages
    /// do not read (their items left out, the ZIP's directory read as it is).
    @Test(arguments: salvageFixtures.filter { $0.fields["lost-pages"] == nil })
    func salvageHasItsStatedOutcome(_ fixture: Fixture) throws {
        let outcome = fixture.fields["salvage"]
        #expect(outcome == "success" || outcome == "partial", "\(fixture.name): only salvage: success and partial are defined")
        var password = try readBytes(Self.directory + "/" + (try #require(fixture.fields["password-file"])))
        if password.last == 0x0A { password.removeLast() }
        let secret = try SecureBytes(copying: password)
        try withTemporaryDirectory { dir in
            let reader = try ArchiveReader(path: fixture.path, salvaging: true)
            #expect(reader.foundByLocalHeaders, "\(fixture.name): read through the central directory")
            #expect(reader.manifestRootMissing == (outcome == "partial"), "\(fixture.name)")
            let archive = try reader.unlock(password: { secret }, keyStore: { throw VaultError.notInitialized(home: "none") },
                                            toleratingMissingItems: true)
            let report = try ArchiveExporter.export(archive, to: dir + "/export", keyStore: nil, .init(salvage: true))
            #expect(report.damaged.isEmpty, "\(fixture.name): \(report.damaged)")
            #expect(try readBytes(dir + "/export/Notes/note.txt") == readBytes(Self.items + "/note.txt"))
            #expect(try readBytes(dir + "/export/Photos/photo.jpg") == readBytes(Self.items + "/photo.jpg"))
        }
    }

    @Test(arguments: salvageFixtures.filter { $0.fields["lost-pages"] != nil })
    func salvageLeavesOutTheLostPages(_ fixture: Fixture) throws {
        #expect(fixture.fields["salvage"] == "partial", "\(fixture.name): a lost page makes a salvage partial")
        let lost = try #require(fixture.fields["lost-pages"]).split(separator: " ").map { try #require(Int($0)) }
        var password = try readBytes(Self.directory + "/" + (try #require(fixture.fields["password-file"])))
        if password.last == 0x0A { password.removeLast() }
        let secret = try SecureBytes(copying: password)
        try withTemporaryDirectory { dir in
            let reader = try ArchiveReader(path: fixture.path, salvaging: true)
            #expect(!reader.manifestRootMissing, "\(fixture.name)")
            let archive = try reader.unlock(password: { secret }, keyStore: { throw VaultError.notInitialized(home: "none") },
                                            toleratingMissingItems: true)
            #expect(archive.lostPages.map(\.number) == lost, "\(fixture.name): \(archive.lostPages)")
            // The golden archive's two items are on its one page: a salvage has nothing to give.
            #expect(archive.lostPages.map(\.itemCount).reduce(0, +) == 2)
            #expect(archive.items.count == 0)
            let report = try ArchiveExporter.export(archive, to: dir + "/export", keyStore: nil, .init(salvage: true))
            #expect(report.damaged.isEmpty, "\(fixture.name): \(report.damaged)")
            #expect(!FileManager.default.fileExists(atPath: dir + "/export/Notes/note.txt"))
            #expect(!FileManager.default.fileExists(atPath: dir + "/export/Photos/photo.jpg"))
        }
    }

    @Test func salvageFixturesExist() {
        #expect(Self.salvageFixtures.count >= 3)
        #expect(Self.salvageFixtures.contains { $0.fields["salvage"] == "partial" })
        #expect(Self.salvageFixtures.contains { $0.fields["lost-pages"] != nil })
    }
}
