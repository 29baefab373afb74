import Glibc
import N11System

/// A file to add, opened and checked before the vault is touched.
public struct InputFile {
    public let name: String
    public let source: ByteSource

    public static func open(_ path: String, asNote: Bool) throws -> InputFile {
        let status: FileStatus?
        do { status = try FileStatus.of(path, followLinks: true) }
        catch { throw VaultError.inputUnreadable(path: path, reason: (error as? SystemError)?.reason ?? "\(error)") }
        guard let status else { throw VaultError.inputMissing(path: path) }
        switch status.kind {
        case .regular: break
        case .directory: throw VaultError.inputNotRegularFile(path: path, what: "a directory")
        default: throw VaultError.inputNotRegularFile(path: path, what: "a special file (device, FIFO or socket)")
        }
        let fd: FileDescriptor
        do { fd = try FileDescriptor.openForReading(path) }
        catch { throw VaultError.inputUnreadable(path: path, reason: (error as? SystemError)?.reason ?? "\(error)") }
        // Check the opened file itself, not the path, so a swap between the checks is caught.
        guard try fd.status().kind == .regular else { throw VaultError.inputNotRegularFile(path: path, what: "not a regular file") }
        let name = Path.lastComponent(of: path)
        if asNote { return InputFile(name: name, source: MemorySource(try readNote(from: fd))) }
        return InputFile(name: name, source: fd)
    }

    /// Notes are UTF-8 text of bounded size, read whole so they can be checked.
    public static func readNote(from fd: FileDescriptor) throws -> [UInt8] {
        let bytes: [UInt8]
        do { bytes = try fd.readAll(limit: Vault.maximumNoteSize) }
        catch let error as SystemError where error.errno == EFBIG { throw VaultError.noteTooLarge(path: fd.path, limit: Vault.maximumNoteSize) }
        guard String(validating: bytes, as: UTF8.self) != nil else { throw VaultError.noteNotText(path: fd.path) }
        return bytes
    }
}

