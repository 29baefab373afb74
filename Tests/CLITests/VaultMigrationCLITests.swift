import Foundation
import Testing
import N11TestSupport

/// Fixtures/vaults/v1: a home whose vault n11archive 0.1.0 wrote, one record file per item
/// in Meta/, one of them damaged (see its README).
private let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .appendingPathComponent("../../Fixtures/vaults/v1").standardized.path

/// The fixture's items: ID → (name, plaintext file), and the damaged one.
private let liveItems: [String: String] = [
    "22CAE085-277C-4B4B-9BF7-44A7138BD474": "photo1.jpg",
    "B9E3F1A0-EE12-4A4A-9487-F5B21E2C417F": "photo2.jpg",
    "74231419-8CF5-4EE3-9133-632CBFDF1577": "photo3.jpg",
    "7FD779BF-8504-4353-BA65-4CE56AC01229": "photo3.jpg",
    "25766701-F863-4F1D-B069-B20786F87A30": "note2.txt",
    "EFBD0F52-1CCF-493E-A7EC-A39DE30EF616": "door",
]
private let damagedID = "16EEDB4D-DAA0-4AAE-B197-4AF6981424E8"

/// Copies the fixture's home into the sandbox with the modes a real home has.
private func installFixture(in s: Sandbox) throws {
    _ = try runShell("cp -R '\(fixture)/home' '\(s.home)' && chmod 700 '\(s.home)' && find '\(s.home)' -type d -exec chmod 700 {} + && find '\(s.home)' -type f -exec chmod 600 {} +")
}

/// What `vault list --json` shows: the live IDs and the damaged ones.
private func listing(_ s: Sandbox) throws -> (ids: Set<String>, damaged: [String], status: Int32) {
    let result = try s.run(["vault", "list", "--json"])
    let object = try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [String: Any]
    let ids = ((object?["items"] as? [[String: Any]]) ?? []).compactMap { $0["id"] as? String }
    return (Set(ids), (object?["damaged"] as? [String]) ?? [], result.status)
}

/// Every live item reads back byte for byte as the plaintext that went in.
private func expectContents(_ s: Sandbox, sourceLocation: SourceLocation = #_sourceLocation) throws {
    for (id, file) in liveItems {
        let cat = try s.run(["vault", "cat", id, "-o", "-"])
        let expected = try readBytes(fixture + "/plaintext/" + file)
        #expect(cat.status == 0 && cat.stdout == expected, "\(id): \(cat)", sourceLocation: sourceLocation)
    }
}

@Suite("Vaults written before the catalogue (v1) migrate on first write")
struct VaultMigrationCLITests {

    @Test("a v1 vault made by 0.1.0: read as it is, migrated whole by the first writer, the damaged record kept damaged and removable")
    func migrates() throws {
        try withSandbox { s in
            try installFixture(in: s)
            // A reader reads v1 as it is and changes nothing.
            let before = try listing(s)
            #expect(before.ids == Set(liveItems.keys) && before.damaged == [damagedID] && before.status == 65, "\(before)")
            try expectContents(s)
            #expect(!exists(TestCatalogue.path(s.vault)), "a reader migrated")

            // The first writer migrates, then does its work.
            let purge = try s.run(["vault", "purge"])
            #expect(purge.status == 0, "\(purge)")
            #expect(try Set(TestCatalogue.records(in: s.vault).map(\.id)) == Set(liveItems.keys).union([damagedID]))
            var isDirectory: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: s.vault + "/Meta", isDirectory: &isDirectory) && !isDirectory.boolValue,
                    "Meta/ gave way to the file that stops older versions")
            #expect(String(decoding: try readBytes(s.vault + "/Meta"), as: UTF8.self).contains("Catalogue.sqlite"))

            let after = try listing(s)
            #expect(after.ids == before.ids && after.damaged == [damagedID] && after.status == 65, "\(after)")
            try expectContents(s)
            let added = try s.run(["vault", "add", try s.file("new.jpg", randomBytes(5000))])
            #expect(added.status == 0, "\(added)")

            let removed = try s.run(["vault", "rm", damagedID])
            #expect(removed.status == 0, "\(removed)")
            #expect(!exists(s.vault + "/Notes/\(damagedID).n11note"))
            #expect(try TestCatalogue.record(id: damagedID, in: s.vault) == nil)
            let verify = try s.run(["vault", "verify"])
            #expect(verify.status == 0, "\(verify)")
        }
    }

    @Test("killed at random moments, a migration leaves the v1 vault or the migrated one: readers see every item either way, the next writer finishes")
    func killedMigration() throws {
        try withSandbox { s in
            // How long an uncut migrating run takes, to spread the kills over it.
            try installFixture(in: s)
            let start = Date()
            #expect(try s.run(["vault", "purge"]).status == 0)
            let duration = Date().timeIntervalSince(start)
            var states: [String: Int] = [:]
            var generator = SystemRandomNumberGenerator()
            for trial in 0..<16 {
                _ = try runShell("rm -rf '\(s.home)'")
                try installFixture(in: s)
                let delay = Double.random(in: 0...(duration * 1.1), using: &generator)
                let process = Process()
                process.executableURL = URL(fileURLWithPath: n11archiveBinary)
                process.arguments = ["vault", "purge"]
                process.environment = ProcessInfo.processInfo.environment.merging(["N11_HOME": s.home]) { $1 }
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                usleep(UInt32(delay * 1_000_000))
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                let state = exists(TestCatalogue.path(s.vault)) ? "migrated" : "v1"
                states[state, default: 0] += 1

                // A reader before any writer: every item, the damaged one still named.
                let read = try listing(s)
                #expect(read.ids == Set(liveItems.keys) && read.damaged == [damagedID], "trial \(trial) (\(state), \(delay)s): \(read)")
                // The next writer finishes (or redoes) the migration.
                let purge = try s.run(["vault", "purge"])
                #expect(purge.status == 0, "trial \(trial): \(purge)")
                let finished = try listing(s)
                #expect(finished.ids == Set(liveItems.keys) && finished.damaged == [damagedID], "trial \(trial): \(finished)")
                #expect(try Set(TestCatalogue.records(in: s.vault).map(\.id)) == Set(liveItems.keys).union([damagedID]))
                #expect(listing(of: s.vault).allSatisfy { !$0.hasPrefix(".n11tmp-") && !$0.hasPrefix(".n11staging-") },
                        "trial \(trial): \(listing(of: s.vault))")
            }
            try expectContents(s)
            print("killedMigration: states after the kills: \(states)")
        }
    }
}
