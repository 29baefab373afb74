import Foundation
import Glibc
import Testing
import N11TestSupport

// Restoring less than everything: `restore --salvage` of an archive with one damaged or
// missing item (every other item comes back byte-exactly, nothing unverified is written,
// exit 3), items chosen by ID, prefix or name glob, and exports that are idempotent and
// carry each item's created time.

extension Sandbox {
    /// A vault of `count` photos of 3,000 distinct bytes each, named `photo-N.jpg`, archived
    /// portably. Returns the archive, its password file and each item's (id, name, bytes)
    /// in the archive's order.
    /// `formatVersion` 2 where a test edits entries of version 2's layout (one an item).
    func archiveOfPhotos(_ count: Int, formatVersion: Int = 3, size: Int = 3000) throws -> (archive: String, password: String, items: [(id: String, name: String, bytes: [UInt8])]) {
        try initialize()
        var files: [String] = []
        var contents: [String: [UInt8]] = [:]
        for n in 0..<count {
            let name = "photo-\(n).jpg"
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* (n + 3) &+ n) }
            files.append(try file(name, bytes))
            contents[name] = bytes
        }
        expectExit(try run(["vault", "add"] + files), 0)
        let password = try passwordFile()
        let archive = path("photos.nu11vlt")
        expectExit(try run(["create", "--portable", "-o", archive, "--password-file", password, "--format-version", String(formatVersion)] + fastKDF), 0)
        let listed = try run(["list", archive, "--password-file", password, "--json"])
        let items = try #require((try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [String: Any])?["items"] as? [[String: Any]])
        let described = try items.map { item -> (id: String, name: String, bytes: [UInt8]) in
            let name = try #require(item["name"] as? String)
            return (try #require(item["id"] as? String), name, try #require(contents[name]))
        }
        return (archive, password, described)
    }

    /// Flips one byte inside the payload of item `id` of a version 2 archive (a few bytes
    /// after its local header's name): that item's first chunk no longer authenticates,
    /// every other entry is intact.
    func damageItem(_ id: String, in archive: String) throws -> String {
        var bytes = try readBytes(archive)
        let name = Array(id.utf8)
        let at = try #require((0..<(bytes.count - name.count)).first { Array(bytes[$0..<$0 + name.count]) == name })
        bytes[at + name.count + 200] ^= 0x01
        return try file("damaged-\(id.prefix(4)).nu11vlt", bytes)
    }

    /// The archive rewritten without the entry of item `id` (as if it was lost).
    func withoutItem(_ id: String, in archive: String) throws -> String {
        let out = path("missing-\(id.prefix(4)).nu11vlt")
        let script = """
        import sys, zipfile
        src, dst, gone = sys.argv[1:4]
        with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
            for info in zin.infolist():
                if gone not in info.filename:
                    zout.writestr(info, zin.read(info.filename), compress_type=info.compress_type)
        """
        let result = try ChildRun.run("/usr/bin/env", ["python3", "-c", script, archive, out, id])
        #expect(result == 0)
        return out
    }

    /// The photos exported under `dir`: file name → bytes.
    func exported(_ dir: String) -> [String: [UInt8]] {
        var out: [String: [UInt8]] = [:]
        for name in listing(of: dir + "/Photos") { out[name] = try? readBytes(dir + "/Photos/" + name) }
        return out
    }
}

/// Runs a program to its end (no shell), returning its exit status.
enum ChildRun {
    static func run(_ program: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }
}

@Suite("n11archive CLI: restoring part of an archive")
struct RestoreSelectionCLITests {

    @Test("one flipped byte: restore refuses (65, vault untouched); --salvage restores every other item byte-exactly and exits 3")
    func salvageDamagedItem() throws {
        try withSandbox { s in
            let (archive, password, items) = try s.archiveOfPhotos(6, formatVersion: 2)
            let victim = items[2]
            let damaged = try s.damageItem(victim.id, in: archive)
            let home2 = s.path("home2")
            let env = ["N11_HOME": home2]

            expectExit(try s.run(["restore", damaged, "--password-file", password], environment: env), 65)
            #expect(!exists(home2 + "/vault"), "an all-or-nothing restore that failed left a vault behind")

            let salvaged = try s.run(["restore", damaged, "--salvage", "--password-file", password], environment: env)
            expectExit(salvaged, 3)
            #expect(salvaged.err.contains("not restored: \(victim.id) '\(victim.name)'"), "\(salvaged)")
            #expect(salvaged.out.contains("restored 5 item(s)"), "\(salvaged)")
            for item in items where item.id != victim.id {
                let cat = try s.run(["vault", "cat", item.id], environment: env)
                expectExit(cat, 0)
                #expect(cat.stdout == item.bytes, "item \(item.name) did not come back byte-exactly")
            }
            expectExit(try s.run(["vault", "cat", victim.id], environment: env), 66)
            // Nothing of the damaged item, and no staging, is left in the vault directory.
            let leftovers = s.tree(home2 + "/vault").keys.filter { $0.contains(victim.id) || $0.hasPrefix(".n11staging") || $0.hasPrefix(".n11tmp") }
            #expect(leftovers.isEmpty, "\(leftovers)")

            // The same as an export, with the JSON report.
            let dir = s.path("out")
            let exported = try s.run(["restore", damaged, "--salvage", "--export", dir, "--password-file", password, "--json"])
            expectExit(exported, 3)
            let document = try #require(try JSONSerialization.jsonObject(with: Data(exported.stdout)) as? [String: Any])
            #expect(document["outcome"] as? String == "partial")
            let named = try #require(document["damaged"] as? [[String: Any]])
            #expect(named.map { $0["id"] as? String } == [victim.id])
            let files = s.exported(dir)
            #expect(files.count == 5)
            for item in items where item.id != victim.id { #expect(files[item.name] == item.bytes, "\(item.name)") }
            #expect(files[victim.name] == nil)
            #expect(listing(of: dir).sorted() == ["Photos"], "staging or other files left in the export directory")

            // An intact archive with --salvage is a plain restore: exit 0.
            expectExit(try s.run(["restore", archive, "--salvage", "--password-file", password, "--dry-run"], environment: env), 0)
        }
    }

    @Test("a secure archive with one damaged item: --salvage brings every other item back into a fresh vault of the same home")
    func salvageSecure() throws {
        try withSandbox { s in
            let (_, _, items) = try s.archiveOfPhotos(4)
            let archive = s.path("secure.nu11vlt")
            expectExit(try s.run(["create", "--secure", "-o", archive, "--format-version", "2"]), 0)
            let victim = items[3]
            let damaged = try s.damageItem(victim.id, in: archive)
            let vault2 = s.path("vault2")
            expectExit(try s.run(["restore", damaged, "--vault", vault2]), 65)
            let salvaged = try s.run(["restore", damaged, "--vault", vault2, "--salvage", "--json"])
            expectExit(salvaged, 3)
            let document = try #require(try JSONSerialization.jsonObject(with: Data(salvaged.stdout)) as? [String: Any])
            #expect((document["damaged"] as? [[String: Any]])?.map { $0["id"] as? String } == [victim.id], "\(salvaged)")
            #expect((document["restored"] as? [String])?.count == 3)
            for item in items where item.id != victim.id {
                #expect(try s.run(["vault", "cat", item.id, "--vault", vault2]).stdout == item.bytes, "\(item.name)")
            }
        }
    }

    @Test("a damaged ZIP directory: restore refuses (65); --salvage finds every entry by its local header and restores all (0, with a warning)")
    func salvagePastDamagedDirectory() throws {
        try withSandbox { s in
            let (archive, password, items) = try s.archiveOfPhotos(5, formatVersion: 2)
            var bytes = try readBytes(archive)
            // One flipped byte in the middle of the central directory's first item record's name.
            let directory = try #require(bytes.firstRange(of: [0x50, 0x4B, 0x01, 0x02] as [UInt8])?.lowerBound)
            let itemRecord = try #require(bytes[directory...].firstRange(of: Array(items[0].id.utf8))?.lowerBound)
            bytes[itemRecord + 10] ^= 0x01
            let damaged = try s.file("directory.nu11vlt", bytes)
            let dir = s.path("out")
            let refused = try s.run(["restore", damaged, "--export", dir, "--password-file", password])
            expectExit(refused, 65)
            #expect(!exists(dir))
            let salvaged = try s.run(["restore", damaged, "--export", dir, "--salvage", "--password-file", password])
            expectExit(salvaged, 0)
            #expect(salvaged.err.contains("found by their local headers"), "\(salvaged)")
            let json = try s.run(["restore", damaged, "--dry-run", "--salvage", "--password-file", password, "--json"])
            expectExit(json, 0)
            #expect((try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [String: Any])?["zipDirectoryDamaged"] as? Bool == true, "\(json)")
            let files = s.exported(dir)
            #expect(files.count == items.count)
            for item in items { #expect(files[item.name] == item.bytes, "\(item.name)") }

            // No directory at all (a copy cut off before its end) and one item's local header
            // damaged: every other item comes back, that one is named as missing (3).
            var cut = Array(bytes[..<directory])
            let victim = items[3]
            let victimName = try #require(cut.firstRange(of: Array(victim.id.utf8))?.lowerBound)
            cut[victimName - 30 - 7] ^= 0x40 // "Photos/" precedes the ID; 30 bytes of header before the name
            let truncated = try s.file("truncated.nu11vlt", cut)
            let home2 = s.path("home2")
            let partial = try s.run(["restore", truncated, "--salvage", "--password-file", password], environment: ["N11_HOME": home2])
            expectExit(partial, 3)
            #expect(partial.err.contains("not restored: \(victim.id)") && partial.err.contains("missing"), "\(partial)")
            for item in items where item.id != victim.id {
                #expect(try s.run(["vault", "cat", item.id], environment: ["N11_HOME": home2]).stdout == item.bytes, "\(item.name)")
            }

            // The manifest's local header damaged too: nothing authenticates the items, so the
            // salvage stops (65), and its hint does not suggest the --salvage just given.
            let manifestName = try #require(cut.firstRange(of: Array("manifest.json".utf8))?.lowerBound)
            cut[manifestName + 2] ^= 0x01
            let hopeless = try s.file("hopeless.nu11vlt", cut)
            let stopped = try s.run(["restore", hopeless, "--export", s.path("out2"), "--salvage", "--password-file", password])
            expectExit(stopped, 65)
            #expect(stopped.err.contains("cannot be salvaged") && !stopped.err.contains("restore --salvage"), "\(stopped)")
            #expect(!exists(s.path("out2")))
        }
    }

    @Test("a missing entry: restore refuses (65); --salvage names it as missing and restores the rest (3)")
    func salvageMissingItem() throws {
        try withSandbox { s in
            let (archive, password, items) = try s.archiveOfPhotos(4, formatVersion: 2)
            let victim = items[1]
            let missing = try s.withoutItem(victim.id, in: archive)
            let dir = s.path("out")
            expectExit(try s.run(["restore", missing, "--export", dir, "--password-file", password]), 65)
            #expect(!exists(dir))
            let salvaged = try s.run(["restore", missing, "--export", dir, "--salvage", "--password-file", password])
            expectExit(salvaged, 3)
            #expect(salvaged.err.contains(victim.id) && salvaged.err.contains("missing"), "\(salvaged)")
            let files = s.exported(dir)
            #expect(files.count == 3)
            for item in items where item.id != victim.id { #expect(files[item.name] == item.bytes) }
        }
    }

    @Test("version 3: a flipped byte in a pack's first chunk costs only the item in it: restore refuses (65), --salvage restores the rest (3)",
          arguments: ["--portable", "--secure"])
    func salvagePackedChunk(mode: String) throws {
        try withSandbox { s in
            // Photos of exactly one chunk each: a pack's first chunk holds the first item only
            // (in ID order), portable or secure (whose payloads are 28 bytes longer).
            let (portable, password, items) = try s.archiveOfPhotos(4, size: 65536)
            var archive = portable, secrets = ["--password-file", password]
            if mode == "--secure" {
                archive = s.path("secure.nu11vlt")
                expectExit(try s.run(["create", "--secure", "-o", archive]), 0)
                secrets = []
            }
            var bytes = try readBytes(archive)
            let name = Array("Packs/0.n11pack".utf8)
            let at = try #require(bytes.firstRange(of: name)?.lowerBound, "the pack's local header")
            bytes[at + name.count + 100] ^= 0x01
            let damaged = try s.file("pack-damaged.nu11vlt", bytes)
            let first = try #require(items.min { $0.id < $1.id })
            let dir = s.path("out")
            expectExit(try s.run(["restore", damaged, "--export", dir] + secrets), 65)
            #expect(!exists(dir))
            let salvaged = try s.run(["restore", damaged, "--export", dir, "--salvage", "--json"] + secrets)
            expectExit(salvaged, 3)
            let document = try #require(try JSONSerialization.jsonObject(with: Data(salvaged.stdout)) as? [String: Any])
            #expect((document["damaged"] as? [[String: Any]])?.map { $0["id"] as? String } == [first.id], "\(salvaged)")
            let files = s.exported(dir)
            #expect(files.count == 3)
            for item in items where item.id != first.id { #expect(files[item.name] == item.bytes, "\(item.name)") }
        }
    }

    @Test("version 3: a damaged manifest page: restore refuses (65); --salvage names the page, its item count and first ID, and exits 3")
    func salvageLostPage() throws {
        try withSandbox { s in
            let (archive, password, items) = try s.archiveOfPhotos(3)
            var bytes = try readBytes(archive)
            let name = Array("Manifest/0.n11page".utf8)
            let at = try #require(bytes.firstRange(of: name)?.lowerBound, "the page's local header")
            bytes[at + name.count + 40] ^= 0x01
            let damaged = try s.file("page-damaged.nu11vlt", bytes)
            let first = try #require(items.map(\.id).min())
            expectExit(try s.run(["restore", damaged, "--export", s.path("out0"), "--password-file", password]), 65)
            #expect(!exists(s.path("out0")))
            let salvaged = try s.run(["restore", damaged, "--export", s.path("out"), "--salvage", "--json", "--password-file", password])
            expectExit(salvaged, 3)
            let document = try #require(try JSONSerialization.jsonObject(with: Data(salvaged.stdout)) as? [String: Any], "\(salvaged)")
            #expect(document["outcome"] as? String == "partial")
            let lost = try #require(document["lostPages"] as? [[String: Any]], "\(salvaged)")
            #expect(lost.count == 1 && lost.first?["page"] as? Int == 0 && lost.first?["items"] as? Int == 3
                    && lost.first?["firstId"] as? String == first, "\(lost)")
            #expect(s.exported(s.path("out")).isEmpty)
            let inWords = try s.run(["restore", damaged, "--export", s.path("out2"), "--salvage", "--password-file", password])
            expectExit(inWords, 3)
            #expect(inWords.err.contains("manifest page 0 of '\(damaged)' does not read")
                    && inWords.err.contains("not restored: the 3 item(s) of manifest page 0, the first \(first)")
                    && inWords.err.contains("the 3 item(s) of the 1 manifest page(s) that do not read were left out;"), "\(inWords)")
            // An item of that page asked for: why it cannot be found, not "no such item".
            let one = try s.run(["restore", damaged, items[1].id, "--export", s.path("out3"), "--salvage", "--password-file", password])
            expectExit(one, 66)
            #expect(one.err.contains("in the 0 manifest page(s) of '\(damaged)' that read: manifest page 0 does not read"), "\(one)")
        }
    }

    @Test("restore FILE ID PREFIX --name GLOB restores only those; a pattern that matches nothing is an error (66), a short prefix a usage error (64)")
    func selectedItems() throws {
        try withSandbox { s in
            let (archive, password, items) = try s.archiveOfPhotos(5)
            let dir = s.path("out")
            let chosen = try s.run(["restore", archive, items[0].id, String(items[1].id.prefix(6)), "photo-3.jpg", "--name", "photo-4.*",
                                    "--export", dir, "--password-file", password])
            expectExit(chosen, 0)
            #expect(Set(s.exported(dir).keys) == Set([items[0].name, items[1].name, "photo-3.jpg", "photo-4.jpg"]), "\(chosen)")
            // An exact name only, never a glob, as ITEM (as `vault rm` takes it).
            let glob = try s.run(["restore", archive, "photo-[3].jpg", "--export", s.path("o1"), "--password-file", password])
            expectExit(glob, 66)

            let home2 = s.path("home2")
            let intoVault = try s.run(["restore", archive, "--name", "photo-[23].jpg", "--password-file", password],
                                      environment: ["N11_HOME": home2])
            expectExit(intoVault, 0)
            #expect(intoVault.out.contains("restored 2 item(s)"), "\(intoVault)")

            let unknown = try s.run(["restore", archive, "--name", "nothing*", "--export", s.path("o2"), "--password-file", password])
            expectExit(unknown, 66)
            #expect(unknown.err.contains("no item named 'nothing*'"), "\(unknown)")
            #expect(!exists(s.path("o2")))
            let short = try s.run(["restore", archive, String(items[0].id.prefix(3)), "--export", s.path("o3"), "--password-file", password])
            expectExit(short, 64)
            #expect(short.err.contains("too short"), "\(short)")
        }
    }

    @Test("export is idempotent (identical files skipped) and sets each file's mtime to the item's created time")
    func idempotentExport() throws {
        try withSandbox { s in
            let (archive, password, items) = try s.archiveOfPhotos(3)
            let dir = s.path("out")
            expectExit(try s.run(["restore", archive, "--export", dir, "--password-file", password]), 0)
            let again = try s.run(["restore", archive, "--export", dir, "--password-file", password])
            expectExit(again, 0)
            #expect(again.err.contains("skipped 3 item(s) already exported unchanged"), "\(again)")

            let listed = try s.run(["list", archive, "--password-file", password, "--json"])
            let described = try #require((try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [String: Any])?["items"] as? [[String: Any]])
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            for item in described {
                let created = try #require((item["created"] as? String).flatMap { formatter.date(from: $0) ?? ISO8601DateFormatter().date(from: $0) })
                let file = dir + "/Photos/" + (item["name"] as! String)
                let modified = try #require(try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date)
                #expect(Int64(modified.timeIntervalSince1970) == Int64(created.timeIntervalSince1970.rounded(.down)))
            }

            // A file that differs is still a conflict, and is kept.
            try writeBytes(Array("edited".utf8), to: dir + "/Photos/" + items[0].name)
            expectExit(try s.run(["restore", archive, "--export", dir, "--password-file", password]), 73)
            #expect(try readBytes(dir + "/Photos/" + items[0].name) == Array("edited".utf8))
        }
    }
}
