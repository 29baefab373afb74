import Foundation
import Testing
import N11Archiver
import N11Format
import N11System
import N11TestSupport

/// Hostile archives the tamper tests do not cover: declared sizes far beyond the real data
/// (a "zip bomb" for a STORED format) and a central directory declaring a million entries.
/// Each must be refused before anything large is allocated or any password is asked for.
@Suite("Hostile archives: huge declared sizes and entry counts")
struct HostileArchiveTests {
    /// Sets an entry's declared sizes (local header and central directory) to `size`.
    func declaring(_ bytes: [UInt8], entry: ZipLayoutEntry, size: UInt32) -> [UInt8] {
        var out = bytes
        for offset in [entry.localHeaderOffset + 18, entry.localHeaderOffset + 22, entry.centralOffset + 20, entry.centralOffset + 24] {
            out.replaceSubrange(offset..<(offset + 4), with: le32(size))
        }
        return out
    }

    /// Turns the end of central directory into a ZIP64 one declaring `count` entries.
    func declaringEntries(_ bytes: [UInt8], layout: ZipLayout, count: UInt64) -> [UInt8] {
        func le64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) } }
        var out = Array(bytes[..<layout.endRecordOffset])
        let zip64End = out.count
        out += le32(0x0606_4B50) + le64(44) + le16(45) + le16(45) + le32(0) + le32(0)
        out += le64(count) + le64(count) + le64(UInt64(layout.centralDirectorySize)) + le64(UInt64(layout.centralDirectoryOffset))
        out += le32(0x0706_4B50) + le32(0) + le64(UInt64(zip64End)) + le32(1)
        out += le32(0x0605_4B50) + le16(0) + le16(0) + le16(0xFFFF) + le16(0xFFFF) + le32(0xFFFF_FFFF) + le32(0xFFFF_FFFF) + le16(0)
        return out
    }

    /// Opens and unlocks `path`, counting password requests and timing it.
    func attempt(_ path: String) -> (error: (any Error)?, passwordAsked: Bool, seconds: Double) {
        var asked = false
        let start = Date()
        do {
            let reader = try ArchiveReader(path: path)
            _ = try reader.unlock(password: { asked = true; return try secret(testPassword) }, keyStore: { throw NoKeyStore() })
            return (nil, asked, Date().timeIntervalSince(start))
        } catch {
            return (error, asked, Date().timeIntervalSince(start))
        }
    }

    @Test("an entry declaring gigabytes it does not have is refused before any password")
    func zipBomb() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            for name in [EntryName.manifest, world.bigEntry.name] {
                let entry = try #require(world.layout.entry(named: name))
                let path = try world.variant("bomb-\(Path.lastComponent(of: name))", declaring(world.bytes, entry: entry, size: 0xFFFF_FFF0))
                let (error, asked, seconds) = attempt(path)
                #expect((error as? ArchiveError)?.kind == .damaged, "\(name): \(String(describing: error))")
                #expect(!asked, "\(name): the password was asked for")
                #expect(seconds < 5, "\(name): took \(seconds) s")
            }
        }
    }

    @Test("a central directory declaring a million (or two million) entries is refused quickly",
          arguments: [1_000_000 as UInt64, 2_000_000])
    func millionEntries(count: UInt64) throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let path = try world.variant("entries-\(count)", declaringEntries(world.bytes, layout: world.layout, count: count))
            let (error, asked, seconds) = attempt(path)
            #expect((error as? ArchiveError)?.kind == .damaged, "\(String(describing: error))")
            #expect(!asked)
            #expect(seconds < 5, "took \(seconds) s")
        }
    }

    @Test("control: the same ZIP64 end record declaring the true count opens and unlocks")
    func trueCountControl() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            let count = UInt64(world.layout.entries.count)
            let path = try world.variant("entries-true", declaringEntries(world.bytes, layout: world.layout, count: count))
            let (error, asked, _) = attempt(path)
            #expect(error == nil, "\(String(describing: error))")
            #expect(asked)
        }
    }

    @Test("an entry name with a NUL byte is refused, even when the part before the NUL is a valid name")
    func nulInName() throws {
        try withTemporaryDirectory { dir in
            let world = try TamperWorld(dir: dir)
            var entries = world.rawEntries
            let index = try #require(entries.firstIndex { $0.nameString == world.bigEntry.name })
            entries[index].name = Array(world.bigEntry.name.utf8) + [0] + Array("../../evil".utf8)
            let path = try world.variant("nul-name", entries: entries)
            let (error, asked, _) = attempt(path)
            #expect((error as? ArchiveError)?.kind == .damaged, "\(String(describing: error))")
            #expect(!asked, "the password was asked for")
        }
    }
}
