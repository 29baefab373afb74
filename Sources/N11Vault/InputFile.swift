import Foundation
import Glibc
import N11System

/// A file to add. Checked (exists, is a regular file, a note is small enough) before the
/// vault is touched, and opened only when it is encrypted, so adding thousands of files
/// needs neither thousands of descriptors nor every note in memory at once.
public struct InputFile: Sendable {
    public let path: String
    public let name: String
    public let asNote: Bool
    /// Its size when checked (for a progress bar's total).
    public let size: Int64
    /// Its modification time when checked: the item's created time (a photo keeps the time
    /// the camera or the copy gave it, and an export gives it back).
    public let modified: Date

    /// 9999-12-31T23:59:59Z: the last second a four-digit year of a timestamp holds.
    static let latestModifiedSeconds: Int64 = 253_402_300_799

    public static func check(_ path: String, asNote: Bool) throws -> InputFile {
        let status: FileStatus?
        do { status = try FileStatus.of(path, followLinks: true) }
        catch { throw VaultError.inputUnreadable(path: path, reason: (error as? SystemError)?.reason ?? "\(error)") }
        guard let status else { throw VaultError.inputMissing(path: path) }
        return try checked(path, status, asNote: asNote)
    }

    private static func checked(_ path: String, _ status: FileStatus, asNote: Bool) throws(VaultError) -> InputFile {
        switch status.kind {
        case .regular: break
        case .directory: throw VaultError.inputIsDirectory(path: path)
        default: throw VaultError.inputNotRegularFile(path: path, what: "a special file (device, FIFO or socket)")
        }
        if asNote && status.size > Int64(Vault.maximumNoteSize) { throw VaultError.noteTooLarge(path: path, limit: Vault.maximumNoteSize) }
        // A time the format can write (1970 to 9999; 0 is an unset time) is kept; any other
        // (a file system allows years past 9999) is no time to keep: the time of the add.
        let modified = (1...Self.latestModifiedSeconds).contains(status.modifiedSeconds)
            ? Date(timeIntervalSince1970: Double(status.modifiedSeconds)) : Date()
        return InputFile(path: path, name: Path.lastComponent(of: path), asNote: asNote, size: status.size, modified: modified)
    }

    /// Opens the file for reading (a note is read whole and checked to be UTF-8; a large
    /// photo the kernel does not hold is read around the page cache, `DirectFileReader`).
    public func open() throws -> ByteSource {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.openForReading(path, leavingAccessTime: true) }
        catch { throw VaultError.inputUnreadable(path: path, reason: (error as? SystemError)?.reason ?? "\(error)") }
        // Check the opened file itself, not the path, so a swap since `check` is caught.
        let status = try fd.status()
        guard status.kind == .regular else { throw VaultError.inputNotRegularFile(path: path, what: "not a regular file") }
        if asNote { return MemorySource(try Self.readNote(from: fd)) }
        return DirectFileReader.ifUncached(fd, size: status.size) ?? fd
    }

    /// A note file checked and read whole through one opening: what `check` and then `open`
    /// give, in one `open`, one `fstat` and the reads, where `vault add` made a `stat` and an
    /// `open` for each of them and read the file once more for its duplicate check (issue 34:
    /// a million notes). What is checked is the opened file, so nothing can be swapped in
    /// between; its modification time is the item's created time, as `check` gives it. A
    /// path that does not open is given `check`'s error (a socket, a folder or device not
    /// readable), so the messages and exit codes are `check`'s. The first pass checked the
    /// path; a FIFO or device put in its place since then is opened (without waiting, and
    /// never as a controlling terminal) before it is refused, as it was when the race fell
    /// between `check`'s `stat` and `open`.
    public static func readNote(at path: String) throws -> NoteFile {
        // Never nil: at the largest note size a larger file is `noteTooLarge`.
        try readNote(at: path, ifAtMost: Vault.maximumNoteSize)!
    }

    /// `readNote(at:)` of a note of at most `limit` bytes; nil for a larger one (checked,
    /// not read: to be read in its turn). What reads notes ahead of their turn holds
    /// only small ones (a note may be 16 MiB).
    public static func readNote(at path: String, ifAtMost limit: Int) throws -> NoteFile? {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.openForReading(path, checkingFirst: true, leavingAccessTime: true) } catch {
            _ = try check(path, asNote: true)
            throw VaultError.inputUnreadable(path: path, reason: (error as? SystemError)?.reason ?? "\(error)")
        }
        defer { try? fd.close() }
        let status: FileStatus
        do { status = try fd.status() }
        catch { throw VaultError.inputUnreadable(path: path, reason: (error as? SystemError)?.reason ?? "\(error)") }
        let file = try checked(path, status, asNote: true)
        if status.size > Int64(limit) && limit < Vault.maximumNoteSize { return nil }
        let bytes: [UInt8]
        do { bytes = try readNote(from: fd, limit: limit) }
        catch VaultError.noteTooLarge where limit < Vault.maximumNoteSize { return nil }   // grew since fstat
        catch let error as VaultError { throw error }
        catch { throw VaultError.inputUnreadable(path: path, reason: (error as? SystemError)?.reason ?? "\(error)") }
        return NoteFile(file: file, bytes: bytes)
    }

    /// Notes are UTF-8 text of bounded size, read whole so they can be checked.
    public static func readNote(from fd: FileDescriptor, limit: Int = Vault.maximumNoteSize) throws -> [UInt8] {
        let bytes: [UInt8]
        do { bytes = try fd.readAll(limit: limit) }
        catch let error as SystemError where error.errno == EFBIG { throw VaultError.noteTooLarge(path: fd.path, limit: limit) }
        guard String(validating: bytes, as: UTF8.self) != nil else { throw VaultError.noteNotText(path: fd.path) }
        return bytes
    }
}

/// A note file's bytes, read whole, and what its check found (`InputFile.readNote(at:)`).
public struct NoteFile: Sendable {
    public let file: InputFile
    public let bytes: [UInt8]
}
