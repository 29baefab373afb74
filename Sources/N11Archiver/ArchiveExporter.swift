import Foundation
import N11Crypto
import N11Format
import N11System
import N11Vault

/// Writes an archive's live items as plaintext files under a directory the user names
/// (`Photos/NAME`, `Notes/NAME`), all or nothing. That directory may be shared with other
/// users, so:
///
/// - the directory and its `Photos`/`Notes` folders are opened without following links and
///   must belong to the user; every later step works relative to those descriptors;
/// - every item is verified and staged in a hidden directory of ours inside it
///   (`.n11tmp-<pid>-export.…`), made durable with one syncfs, and only then published: a
///   folder that did not exist is moved in whole with one rename; into a folder that exists,
///   file by file with renameat2 — `RENAME_NOREPLACE`, so a file that appeared since the
///   conflict check is never replaced without `--overwrite`, and `RENAME_EXCHANGE` with it,
///   so a replaced file can be put back. A failure part-way moves everything back;
/// - leftovers of killed exports are removed only if they are real directories of ours.
public enum ArchiveExporter {
    public static func export(_ archive: UnlockedArchive, to directory: String, keyStore: KeyStore?,
                              _ options: RestoreOptions = .init(),
                              progress: ArchiveProgress? = nil) throws(ArchiveError) -> ArchiveRestorer.Report {
        let (overwrite, dryRun, now) = (options.overwrite, options.dryRun, options.now)
        var report = ArchiveRestorer.Report(for: archive)
        let root = Path.withoutTrailingSlashes(Path.absolute(directory))
        report.destination = root
        report.dryRun = dryRun
        let selected = try archive.selected(options.selection)

        let destination: ExportDestination
        do { destination = try ExportDestination(root, creating: !dryRun) } catch { throw ArchiveError.writing(root, error) }
        var published = false
        // A failed export into a directory this run made leaves no directory behind either.
        let interrupted = Interruption.onInterrupt { destination.removeIfCreated() }
        defer {
            Interruption.cancel(interrupted)
            if !published { destination.removeIfCreated() }
        }

        // Nothing per item in memory but the report's outcomes (issue 34): which
        // candidate name each item got is in a scratch table, and names are made again.
        let names: ExportNames
        do { names = try ExportNames() } catch { throw ArchiveError.writing(root, error) }
        var conflicts = FirstFew()
        do {
            // Names are given over the whole archive, selected or not, so an item's file name
            // does not depend on which others were asked for.
            try archive.items.forEach { index, item in
                let (folder, name) = try names.give(index: index, item)
                guard selected.includes(index) else { return }
                if item.isExpired(at: now) { report.record(.skippedExpired, index: index); return }
                switch try destination.existing(at: folder, name, size: item.size, sha256: item.sha256Bytes) {
                case .nothing: report.record(.restored, index: index)
                case .identical: report.record(.skippedIdentical, index: index)
                case .different:
                    // With --overwrite it replaces the user's own file: said as that (the summary,
                    // `replaced` in --json), a dry run too.
                    if !overwrite { conflicts.append(Path.join(Path.join(root, folder), name)) }
                    report.record(.replaced, index: index)
                }
            }
        } catch let error as ArchiveError {
            throw error   // a page that no longer reads
        } catch { throw ArchiveError.writing(root, error) }
        if !conflicts.isEmpty && !overwrite { throw .exportConflicts(paths: conflicts) }

        let writing = SelectedItems(selected, keeping: { [RestoreOutcome.restored, .replaced].contains(report.outcome(of: $0)) },
                                    below: archive.items.count)
        let salvage = options.salvage ? { (n: Int, item: Manifest.Item, error: ArchiveError) in
            report.forget(index: writing[n])
            report.damaged.append(.init(item, error))
        } : nil
        if dryRun {
            try ArchiveVerifier.checkAll(archive, writing, keyStore: keyStore, salvage: salvage,
                                         progress: progress) { _, item in
                report.plaintextBytes += item.size
            }
            progress?.finish()
            return report
        }

        let staging: ExportStaging
        do { staging = try destination.makeStaging(folders: Set(ItemKind.allCases.map(\.directory))) } catch { throw ArchiveError.writing(root, error) }
        defer { staging.remove() }
        // Small items' files are made on a writer thread (`SerialWorkerPool`) while the next
        // items are verified; stopped before the staging directory goes (defers run last first).
        var writers = SerialWorkerPool()
        defer { writers.cancel() }
        var stagedPerFolder: [String: Int] = [:]
        // Photos' files are written here (`DirectFileWriter`); stopped before the staging
        // directory goes.
        let directBuffers = DirectWriteBuffers(holdsPlaintext: true)
        defer { directBuffers.abandonWrites() }
        try ArchiveVerifier.forEachItem(archive, writing, progress: progress, salvage: salvage) { n, item, payload in
            let (folder, name) = try names.name(index: writing[n], item)
            if item.size <= writtenBesideLimit {
                // Every tag, the size and the digest checked in memory first: only verified
                // plaintext is handed to a writer, which makes and writes the staged file.
                let plaintext = VerifiedPlaintext(capacity: Int(item.size))
                try ArchiveVerifier.checkItem(archive, item, payload: payload, keyStore: keyStore, into: plaintext, progress: progress)
                let modified = Int64(item.created.timeIntervalSince1970.rounded(.down))
                staging.startWriteback()
                try writers.submit { try staging.write(plaintext, to: name, in: folder, modified: modified) }
                stagedPerFolder[folder, default: 0] += 1
                report.plaintextBytes += item.size
                return
            }
            let file = try staging.createFile(name, in: folder)
            do {
                let write = { (sink: ByteSink) in
                    try ArchiveVerifier.checkItem(archive, item, payload: payload, keyStore: keyStore,
                                                  into: FileStagingSink(sink), progress: progress)
                }
                // A photo keeps the time it was taken (added), not the time of the export.
                let modified = Int64(item.created.timeIntervalSince1970.rounded(.down))
                if item.size >= DirectFileWriter.worthFrom {
                    // Around the page cache (`DirectFileWriter`): nobody reads it before it is
                    // published, and the syncfs then finds it written. Its time is set after
                    // its last write, on the buffers' thread, which then closes it.
                    try DirectFileWriter.writing(to: file, through: directBuffers, then: { file in
                        try file.setModificationTime(secondsSince1970: modified)
                        try file.close()
                    }, write)
                } else {
                    try write(file)
                    try file.setModificationTime(secondsSince1970: modified)
                    try file.close()
                }
            } catch {
                // Nothing unverified stays, even in staging: a salvage goes on without it.
                staging.removeFile(name, in: folder)
                // Named as the destination's file: this one's, or an earlier photo's whose
                // write failed on `DirectFileWriter`'s thread.
                throw staging.named(error)
            }
            stagedPerFolder[folder, default: 0] += 1
            report.plaintextBytes += item.size
        }
        do {
            do { try directBuffers.waitForWrites() } catch { throw staging.named(error) }
            try writers.finish()
            // Every staged file durable with one syncfs (not an fsync per file), then the moves.
            try staging.syncFileSystem()
            // The verified files, again from the archive's pages, in its order.
            let report = report
            let files = { (body: (String, String) throws -> Void) throws in
                for outcome in [RestoreOutcome.restored, .replaced] {
                    try report.forEachIndex(outcome) { index in
                        let (folder, name) = try names.name(index: index, try archive.items.item(index))
                        try body(folder, name)
                    }
                }
            }
            // Ctrl-C waits for the moves (and, on failure, their undoing) to end.
            try Interruption.critical {
                try destination.publish(staging, folders: Set(stagedPerFolder.keys), files: files, overwrite: overwrite)
                Interruption.committed("the export")
            }
        } catch let error as ArchiveError { throw error } catch { throw ArchiveError.writing(root, error) }
        published = true
        progress?.finish()
        return report
    }

    /// Writes one item's plaintext to `sink` (`restore FILE ITEM --export -`). Standard
    /// output cannot be staged, so the item is read twice: a first pass checks every tag, its
    /// size and digest writing nothing, and only then a second pass (each chunk verified
    /// again as it is read) writes it. Returns the item.
    public static func exportOne(_ archive: UnlockedArchive, index: Int, keyStore: KeyStore?,
                                 to sink: UnverifiedPlaintextSink) throws(ArchiveError) -> Manifest.Item {
        try ArchiveVerifier.checkAll(archive, [index], keyStore: keyStore, salvage: nil, progress: nil) { _, _ in }
        try ArchiveVerifier.forEachItem(archive, [index], progress: nil, salvage: nil) { _, item, payload in
            try ArchiveVerifier.checkItem(archive, item, payload: payload, keyStore: keyStore, into: sink)
        }
        return try archive.items.item(index)
    }

    /// Refuses an export directory that is a link or another user's, or whose `Photos` or
    /// `Notes` is, before any password is asked for: `export` checks again (and for real,
    /// on descriptors) when it runs; this only spares a person the prompt and the wait.
    public static func checkDestination(_ directory: String) throws(ArchiveError) {
        let root = Path.withoutTrailingSlashes(Path.absolute(directory))
        do {
            let destination = try ExportDestination(root, creating: false, sweeping: false)
            for kind in [ItemKind.photo, .note] { _ = try destination.folder(kind.directory) }
        } catch { throw ArchiveError.writing(root, error) }
    }

    /// The longest file name Linux file systems take (NAME_MAX), in bytes.
    static let nameMax = 255

    /// The largest item verified in memory and written by the writer thread: at most six
    /// batches of 64 such items are held (`SerialWorkerPool`), about 6 MiB.
    static let writtenBesideLimit: Int64 = 16 << 10

    /// The folder (`Photos` or `Notes`) and file name for an item, its `attempt`th
    /// candidate. A name the manifest gives is a label, so "." and ".." become the item ID;
    /// the first candidate is the name itself, the next `~ID8` before its extension, then
    /// `~ID8-2`, `~ID8-3`, …, the stem shortened (at a character boundary) so the name stays
    /// within NAME_MAX. `ExportNames` gives each item the first candidate no earlier item has.
    static func exportName(for item: Manifest.Item, attempt: Int) -> (folder: String, name: String) {
        let folder = item.kind.directory
        var name = item.name
        if name == "." || name == ".." || name.hasPrefix(".n11") { name = item.id }
        guard attempt > 0 else { return (folder, name) }
        var (stem, dotExtension): (String, String) = {
            guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return (name, "") }
            return (String(name[..<dot]), String(name[dot...]))
        }()
        // An "extension" that leaves no room for the suffix is part of the stem.
        if dotExtension.utf8.count > nameMax / 2 { (stem, dotExtension) = (name, "") }
        let suffix = "~\(item.id.prefix(8))\(attempt == 1 ? "" : "-\(attempt)")\(dotExtension)"
        return (folder, shortened(stem, toBytes: nameMax - suffix.utf8.count) + suffix)
    }

    /// `text` cut to at most `limit` UTF-8 bytes, whole characters only.
    static func shortened(_ text: String, toBytes limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var result = ""
        var used = 0
        for character in text {
            let size = character.utf8.count
            if used + size > limit { break }
            result.append(character)
            used += size
        }
        return result
    }
}

/// The export directory, opened without following links and checked to be the user's.
final class ExportDestination {
    let path: String
    /// nil only for a dry run into a directory that does not exist yet.
    private let root: DirectoryHandle?
    private let createdRoot: Bool
    /// The `Photos`/`Notes` folders that exist, opened (and checked) when first asked for.
    private var folders: [String: DirectoryHandle?] = [:]

    init(_ path: String, creating: Bool, sweeping: Bool = true) throws {
        self.path = path
        switch try FileStatus.of(path)?.kind {
        case nil where !creating:
            root = nil
            createdRoot = false
            return
        case nil:
            try Directory.ensure(Path.directory(of: path), mode: 0o700)
            // Someone may create it between the check and mkdir: then it is not ours to remove.
            createdRoot = mkdir(path, 0o700) == 0
            guard createdRoot || errno == EEXIST else { throw SystemError("cannot create directory", path: path) }
        case .symlink?:
            throw ExportRefusal.symbolicLink(path: path)
        default:
            createdRoot = false
        }
        let opened = try DirectoryHandle.open(path)
        try opened.requireOwnedByUser()
        root = opened
        // Plaintext staged by a killed export into this directory: removed now. The name
        // carries the PID, so a live export's staging is left alone; anything that is not a
        // directory of ours (a planted link, say) is never entered.
        if sweeping {
            for name in try opened.entries(where: { $0.hasPrefix(AtomicFile.tempPrefix) }) where !AtomicFile.isLive(name) {
                opened.removePrivateTree(name)
            }
        }
    }

    /// The folder `name` if it exists: a real directory of the user's. A link or a folder of
    /// another user is refused (our plaintext would land where they choose); a file is a conflict.
    func folder(_ name: String) throws -> DirectoryHandle? {
        if let known = folders[name] { return known }
        guard let root else { return nil }
        let handle: DirectoryHandle?
        switch try root.status(of: name)?.kind {
        case nil: handle = nil
        case .directory?:
            let opened = try root.openSubdirectory(name)
            try opened.requireOwnedByUser()
            handle = opened
        case .symlink?: throw ExportRefusal.symbolicLink(path: Path.join(path, name))
        default: throw ExportRefusal.conflicts(path: Path.join(path, name))
        }
        folders[name] = handle
        return handle
    }

    /// What is at `folder/name` already.
    enum Existing { case nothing, identical, different }

    /// What is at `folder/name`: nothing, a regular file with the item's size and SHA-256
    /// (an earlier export of it: skipped), or something else (a conflict). A directory there
    /// is refused even with --overwrite; a status or file that cannot be read counts as
    /// different, never as free.
    func existing(at folder: String, _ name: String, size: Int64, sha256: [UInt8]) throws -> Existing {
        guard let directory = try self.folder(folder) else { return .nothing }
        let target = Path.join(directory.path, name)
        let status: FileStatus?
        do { status = try directory.status(of: name) } catch { return .different }
        guard let status else { return .nothing }
        if status.kind == .directory { throw ExportRefusal.conflicts(path: target) }
        guard status.kind == .regular, status.size == size else { return .different }
        return ((try? Self.digest(of: name, in: directory)) == sha256) ? .identical : .different
    }

    /// SHA-256 of the regular file `name` in `directory`, opened without following a link.
    private static func digest(of name: String, in directory: DirectoryHandle) throws -> [UInt8] {
        let file = try directory.openFileForReading(name)
        guard try file.status().kind == .regular else { throw ExportRefusal.conflicts(path: file.path) }
        let digest = try SHA256Digest()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = try file.read(into: &buffer, count: buffer.count)
            if n == 0 { break }
            digest.update(buffer[0..<n])
        }
        return try digest.finish()
    }

    func makeStaging(folders: Set<String>) throws -> ExportStaging {
        guard let root else { preconditionFailure("staging needs the directory (not a dry run)") }
        return try ExportStaging(in: root, folders: folders)
    }

    /// Moves the staged files into place; on any failure moves back what was moved. `files`
    /// gives each verified file's folder and name, the same each time it is called: it is
    /// walked again to undo, instead of keeping a list of moves (issue 34).
    func publish(_ staging: ExportStaging, folders staged: Set<String>,
                 files: ((String, String) throws -> Void) throws -> Void, overwrite: Bool) throws {
        guard let root else { preconditionFailure("publishing needs the directory") }
        var movedFolders: [String] = []
        var movedFiles = 0
        do {
            // A folder none of whose files verified (a salvage) is not published empty.
            for folder in staged.sorted() where try self.folder(folder) == nil {
                // New folder: one rename publishes all of its files at once.
                do {
                    try DirectoryHandle.rename(folder, in: staging.directory, to: folder, in: root, .noReplace)
                    movedFolders.append(folder)
                } catch let error as SystemError where error.errno == EEXIST {
                    folders[folder] = nil   // created meanwhile: publish file by file into it
                }
            }
            // File by file only into folders that were there: the walk reads every verified
            // item's page again (3,000,000 notes: every page, for nothing, when both moved).
            if !staged.isSubset(of: movedFolders) {
                try files { folder, name in
                    guard !movedFolders.contains(folder) else { return }
                    guard let target = try self.folder(folder) else { throw SystemError("cannot open directory", path: Path.join(path, folder), errno: ENOENT) }
                    try staging.publish(name, of: folder, into: target, replacing: overwrite)
                    movedFiles += 1
                }
            }
            for folder in staged { try self.folder(folder)?.sync() }
            try root.sync()
        } catch {
            for folder in movedFolders.reversed() { staging.takeBack(folder: folder, from: root) }
            var undone = 0
            struct Done: Error {}
            if movedFiles > 0 { try? files { folder, name in
                guard undone < movedFiles else { throw Done() }
                guard !movedFolders.contains(folder) else { return }
                undone += 1
                if let target = folders[folder] ?? nil { staging.takeBack(name, of: folder, from: target) }
            } }
            throw error
        }
    }

    /// Removes the directory if this run created it and it is empty again.
    func removeIfCreated() {
        guard createdRoot else { return }
        try? FileSystem.removeEmptyDirectory(path)
    }
}

/// The hidden staging directory of one export, inside the export directory.
/// Used by the writer thread too (`write(_:to:in:modified:)`): it only reads
/// `folderHandles`, filled before the first item, and make files in its folders.
final class ExportStaging: @unchecked Sendable {
    let directory: DirectoryHandle
    let folders: Set<String>
    private let name: String
    private let parent: DirectoryHandle
    private var folderHandles: [String: DirectoryHandle] = [:]
    /// Opened before the first staged file is made: a syncfs reports only the writeback
    /// errors that came after its descriptor was opened (`FileSystemSync`).
    private let fileSystem: FileSystemSync
    /// Removes the staged plaintext if Ctrl-C or SIGTERM ends the export.
    private var interruptCleanup: Interruption.Token?

    init(in parent: DirectoryHandle, folders: Set<String>) throws {
        self.parent = parent
        self.folders = folders
        name = AtomicFile.tempName(for: "export")
        // Registered before the directory exists, so no moment has it without its cleanup.
        let staged = name
        let cleanup = Interruption.onInterrupt { parent.removePrivateTree(staged) }
        interruptCleanup = cleanup
        // Made where Ctrl-C's cleanup cannot be running, folders too: it found the new
        // staging directory empty, a folder was made in it, and its rmdir failed, leaving the
        // staging directory (and the export's) behind (a CI run caught it). A failure here
        // takes back what was made.
        typealias Made = (directory: DirectoryHandle, fileSystem: FileSystemSync, folders: [String: DirectoryHandle])
        let made = Interruption.critical { () -> Result<Made, any Error> in
            do { try parent.makeSubdirectory(staged, mode: 0o700) } catch { return .failure(error) }
            let result = Result { () throws -> Made in
                let directory = try parent.openSubdirectory(staged)
                // The export directory may be writable by others (only its owner is checked):
                // one of them could have put a directory of their own in the place of the one
                // just made, and plaintext staged there could not be taken back.
                try directory.requireOwnedByUser()
                var handles: [String: DirectoryHandle] = [:]
                for folder in folders {
                    try directory.makeSubdirectory(folder, mode: 0o700)
                    handles[folder] = try directory.openSubdirectory(folder)
                }
                return (directory, try directory.fileSystemSync(), handles)
            }
            if case .failure = result { parent.removePrivateTree(staged) }
            return result
        }
        switch made {
        case .success(let made):
            (directory, fileSystem, folderHandles) = (made.directory, made.fileSystem, made.folders)
        case .failure(let error):
            Interruption.cancel(cleanup)
            throw error
        }
    }

    /// Created where Ctrl-C's cleanup cannot be running: a file made while it removed the
    /// tree kept the staging directory (and the export's) from going (a CI run caught it).
    func createFile(_ file: String, in folder: String) throws -> FileDescriptor {
        do { return try Interruption.critical { try folderHandles[folder]!.createFile(file, mode: 0o600) } }
        catch { throw named(error, file: file, in: folder) }
    }

    /// A failure to make or write a staged file, naming the place the file was going to:
    /// the hidden staging directory means nothing to the person reading the message (a full
    /// USB stick said "cannot write '…/.n11tmp-20846-export.de80cbbd7ab4/Notes/n132.txt'"),
    /// as `create` names the archive asked for rather than its temp file.
    func named(_ error: any Error, file: String, in folder: String) -> any Error {
        guard let error = error as? SystemError, let path = error.path,
              path.hasPrefix(directory.path + "/") else { return error }
        return SystemError(error.operation, path: Path.join(Path.join(parent.path, folder), file), errno: error.errno)
    }

    /// The same for an error whose path is a staged file's, whichever it is (a photo whose
    /// last writes failed on `DirectFileWriter`'s thread is reported by a later call).
    func named(_ error: any Error) -> any Error {
        guard let error = error as? SystemError, let path = error.path,
              path.hasPrefix(directory.path + "/") else { return error }
        return SystemError(error.operation, path: parent.path + path.dropFirst(directory.path.count), errno: error.errno)
    }

    /// Makes a staged file of verified plaintext (a small item, on a writer thread), then wipes
    /// the plaintext. Made within an `alongside` section, for the reason `createFile` gives.
    func write(_ plaintext: VerifiedPlaintext, to file: String, in folder: String, modified: Int64) throws {
        defer { plaintext.wipe() }
        let handle: FileDescriptor
        do { handle = try Interruption.alongside { try folderHandles[folder]!.createFile(file, mode: 0o600) } }
        catch { throw named(error, file: file, in: folder) }
        do {
            try handle.write(plaintext.bytes[...])
            try handle.setModificationTime(secondsSince1970: modified)
            try handle.close()
        } catch {
            try? handle.close()
            removeFile(file, in: folder)
            throw named(error, file: file, in: folder)
        }
    }

    /// Removes a staged file that did not verify.
    func removeFile(_ file: String, in folder: String) {
        try? folderHandles[folder]?.removeFile(file)
    }

    /// Every staged file durable with one syncfs (see `FileSystemSync`).
    func syncFileSystem() throws { try fileSystem.sync() }

    /// Has the staged files written back while the export goes on (see `FileSystemSync`).
    func startWriteback() { fileSystem.startWriteback() }

    /// Moves one staged file into `target`. Never replaces a file that appeared since the
    /// conflict check unless `replacing`; a replaced file is exchanged into staging, not
    /// lost, until the export has succeeded.
    func publish(_ file: String, of folder: String, into target: DirectoryHandle, replacing: Bool) throws {
        let staged = folderHandles[folder]!
        do {
            try DirectoryHandle.rename(file, in: staged, to: file, in: target, .noReplace)
        } catch let error as SystemError where error.errno == EEXIST {
            let path = Path.join(target.path, file)
            guard replacing else { throw ExportRefusal.conflicts(path: path) }
            try DirectoryHandle.rename(file, in: staged, to: file, in: target, .exchange)
            // A directory that appeared there since the check is never replaced (its
            // contents would be thrown away with the staging directory): swap it back.
            if (try? staged.status(of: file))??.kind != .regular && (try? staged.status(of: file))??.kind != .symlink {
                try? DirectoryHandle.rename(file, in: staged, to: file, in: target, .exchange)
                throw ExportRefusal.conflicts(path: path)
            }
        }
    }

    /// Undoes a folder's move (best effort: a failure here leaves it where it is).
    func takeBack(folder: String, from root: DirectoryHandle) {
        try? DirectoryHandle.rename(folder, in: root, to: folder, in: directory, .noReplace)
    }

    /// Undoes one file's move (best effort). A file replaced by it is in staging under the
    /// same name (exchanged): exchanged back; only if nothing is there (ENOENT) is the file
    /// moved back, so the user's replaced file is never left in staging to be removed.
    func takeBack(_ file: String, of folder: String, from target: DirectoryHandle) {
        guard let staged = folderHandles[folder] else { return }
        do { try DirectoryHandle.rename(file, in: target, to: file, in: staged, .exchange) }
        catch let error as SystemError where error.errno == ENOENT {
            try? DirectoryHandle.rename(file, in: target, to: file, in: staged, .noReplace)
        } catch {}
    }

    /// Removes the staging directory and what is left in it (files replaced by the export,
    /// or everything after a failure).
    func remove() {
        fileSystem.stopWriteback(waiting: false)
        parent.removePrivateTree(name)
        if let interruptCleanup { Interruption.cancel(interruptCleanup) }
    }
}

/// Why an export refuses its destination, before anything is written.
enum ExportRefusal: Error {
    case symbolicLink(path: String)
    case conflicts(path: String)
}

/// A small item's plaintext, kept in memory while it is verified (`ArchiveVerifier.checkItem`)
/// and until a writer thread has written it into the export's staging; wiped then.
final class VerifiedPlaintext: UnverifiedPlaintextSink, @unchecked Sendable {
    private(set) var bytes: [UInt8] = []
    init(capacity: Int) { bytes.reserveCapacity(capacity) }
    /// Also when a job is dropped (a cancel, a failed writer) or an item fails its checks.
    deinit { bytes.wipe() }
    func stage(_ slice: ArraySlice<UInt8>) throws { bytes.append(contentsOf: slice) }
    func wipe() { bytes.wipe() }
}

/// Writes plaintext into a hidden staging file of an export (published only after it verified).
final class FileStagingSink: UnverifiedPlaintextSink {
    private let file: ByteSink
    init(_ file: ByteSink) { self.file = file }
    func stage(_ bytes: ArraySlice<UInt8>) throws { try file.write(bytes) }
}

/// The names an export gives, over the whole archive in its order (ArchiveExporter.
/// exportName): the names taken as 64-bit `ScratchDigest`s, and which candidate each item
/// got where it is not the first, both in `ScratchKeyTable`s (issue 34: held in memory,
/// they grew by 20 MiB per million items). Two names with the same digest count as one: the
/// later item gets its next candidate, a longer name but never a clash (the odds are about
/// 10^-7 at 3,000,000 names, and differ from run to run).
struct ExportNames {
    /// Item index → its candidate, for the items whose first candidate was taken.
    private let attempts: ScratchKeyTable
    private let taken: ScratchKeyTable
    private let digests: ScratchDigest

    init() throws {
        digests = try ScratchDigest()
        attempts = try ScratchKeyTable(purpose: "the export's renamed items (a scratch database in $TMPDIR)", cacheKiB: 512)
        taken = try ScratchKeyTable(purpose: "the export's names (a scratch database in $TMPDIR)")
    }

    /// Gives item `index` the first candidate no earlier item took.
    func give(index: Int, _ item: Manifest.Item) throws(SystemError) -> (folder: String, name: String) {
        var attempt = 0
        while true {
            let candidate = ArchiveExporter.exportName(for: item, attempt: attempt)
            if try taken.insert(digest(candidate)) {
                if attempt > 0 { try attempts.insert(Int64(index), value: Int64(attempt)) }
                return candidate
            }
            attempt += 1
        }
    }

    /// The name `give` gave item `index`.
    func name(index: Int, _ item: Manifest.Item) throws(SystemError) -> (folder: String, name: String) {
        ArchiveExporter.exportName(for: item, attempt: Int(try attempts.value(of: Int64(index)) ?? 0))
    }

    /// Keyed afresh by each export: an archive cannot be made to collide on purpose.
    private func digest(_ candidate: (folder: String, name: String)) -> Int64 {
        digests.digest([candidate.folder, candidate.name])
    }
}
