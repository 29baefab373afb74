internal import CZip
import Glibc
import N11System

/// What the ZIP says about one entry. Declared values only: nothing here is authenticated.
public struct ZipEntryInfo: Sendable {
    public let index: Int
    public let name: String
    public let size: Int64
}

/// Reads a ZIP with libzip's consistency checks on, refusing every kind of entry the format
/// never writes (FORMAT.md §1) before any of it is read. For a salvage, it can instead find
/// the entries by their local headers alone (`init(scanningLocalHeadersOf:accepting:)`).
///
/// Threads may share a reader: every libzip call goes through one lock (`libzipCalls`), and
/// entries found by their local headers are read with positioned reads.
public final class ZipReader: @unchecked Sendable {
    public let path: String
    private let backend: Backend
    /// The file being downloaded that this reads as it arrives (`init(arriving:)`).
    private let arriving: ArrivingFile?
    /// Held around every libzip call on `backend`'s handle and the entries opened from it.
    /// libzip's handle, and the file position under it, are one reader's; a version 3
    /// archive's manifest pages are read on one thread while its packs stream on another
    /// (a restore). A second handle of the same file for the other thread held libzip's whole
    /// central directory again: 0.5 MB at 3,000,000 items (issue 34). Each entry remembers
    /// its own offset, so reads of two entries may interleave.
    fileprivate let libzipCalls = LockAndCondition()

    private enum Backend {
        /// libzip, through the central directory.
        case directory(OpaquePointer)
        /// The entries a `LocalHeaderScan` found, read from the open file.
        case localHeaders(FileDescriptor, [ScannedEntry])
    }

    public init(path: String) throws(ContainerError) {
        self.path = path
        var code: Int32 = 0
        guard let za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &code) else {
            throw .unreadable(path: path, cause: .libzip(code: code, errno: 0, message: ZipWriter.message(code)))
        }
        backend = .directory(za)
        arriving = nil
    }

    /// Reads a file while it is downloaded (issue 29): libzip reads through a source that
    /// waits for the bytes it asks for. It opens from the file's end (already there) without
    /// `ZIP_CHECKCONS`, which would read every local header and so wait for the whole file;
    /// `checkWhole()` runs that check once the file is complete, and a reader must call it
    /// before anything read this way is made visible.
    public init(arriving file: ArrivingFile) throws(ContainerError) {
        path = file.path
        arriving = file
        var error = zip_error_t()
        zip_error_init(&error)
        defer { zip_error_fini(&error) }
        let source = ArrivingZipSource(file)
        // libzip owns the source from here; the retain is released on ZIP_SOURCE_FREE.
        let context = Unmanaged.passRetained(source).toOpaque()
        guard let zipSource = zip_source_function_create(arrivingSourceCallback, context, &error) else {
            Unmanaged<ArrivingZipSource>.fromOpaque(context).release()
            throw .unreadable(path: path, cause: Self.failure(&error))
        }
        guard let za = zip_open_from_source(zipSource, ZIP_RDONLY, &error) else {
            zip_source_free(zipSource)
            throw .unreadable(path: path, cause: Self.failure(&error))
        }
        backend = .directory(za)
    }

    /// For a reader of an arriving file: waits for the whole file (throwing the download's
    /// failure as it is), then opens it again with libzip's consistency checks (every local
    /// header against the central directory) and requires the same entries. Nothing for others.
    public func checkWhole() throws {
        guard let arriving else { return }
        try arriving.waitUntilWhole()
        let whole = try ZipReader(path: path)
        guard whole.entryCount == entryCount else {
            throw ContainerError.unreadable(path: path, cause: .libzip(code: 0, errno: 0, message: "the ZIP read as it arrived differs from the whole file"))
        }
        for index in 0..<entryCount {
            let (a, b) = (try entry(at: index), try whole.entry(at: index))
            guard a.name == b.name, a.size == b.size else {
                throw ContainerError.unreadable(path: path, cause: .libzip(code: 0, errno: 0, message: "the ZIP read as it arrived differs from the whole file"))
            }
        }
    }

    static func failure(_ error: inout zip_error_t) -> ReadFailure {
        let errno = zip_error_system_type(&error) == ZIP_ET_SYS ? zip_error_code_system(&error) : 0
        return .libzip(code: zip_error_code_zip(&error), errno: errno, message: String(cString: zip_error_strerror(&error)))
    }

    /// Finds the entries without the central directory: walks the local headers from the
    /// start of the file, skipping what does not read as a STORED entry whose name `accepts`
    /// takes (FORMAT.md §1.1), and no more than `maximumEntries + 1` of them. Nothing found
    /// this way is trusted more than a ZIP's word.
    public init(scanningLocalHeadersOf path: String, maximumEntries: Int,
                accepting accepts: @escaping (String) -> Bool) throws(ContainerError) {
        self.path = path
        do {
            let file = try FileDescriptor.openForReading(path)
            let scan = LocalHeaderScan(file: file, fileSize: try file.status().size, accepts: accepts, maximumEntries: maximumEntries)
            backend = .localHeaders(file, try scan.entries())
            arriving = nil
        } catch let error as ContainerError {
            throw error
        } catch {
            throw .unreadable(path: path, cause: (error as? SystemError).map(ReadFailure.system)
                                                  ?? .libzip(code: 0, errno: 0, message: "\(error)"))
        }
    }

    deinit { if case .directory(let archive) = backend { zip_discard(archive) } }

    /// libzip's error as a value (for entry `entry`, if given, named in the message).
    static func failure(_ error: UnsafeMutablePointer<zip_error_t>?, entry: Int? = nil) -> ReadFailure {
        guard let error else { return .libzip(code: 0, errno: 0, message: "unknown libzip error") }
        let errno = zip_error_system_type(error) == ZIP_ET_SYS ? zip_error_code_system(error) : 0
        let message = String(cString: zip_error_strerror(error))
        return .libzip(code: zip_error_code_zip(error), errno: errno, message: entry.map { "entry \($0): " + message } ?? message)
    }

    /// Whether the entries were found by their local headers (the central directory unused).
    public var foundByLocalHeaders: Bool {
        if case .localHeaders = backend { return true } else { return false }
    }

    /// The number of entries the central directory declares (or the scan found).
    public var entryCount: Int {
        switch backend {
        case .directory(let archive):
            libzipCalls.lock()
            defer { libzipCalls.unlock() }
            return Int(zip_get_num_entries(archive, 0))
        case .localHeaders(_, let entries): return entries.count
        }
    }

    /// Stats and checks entry `index`: STORED, not encrypted, not a link or directory.
    public func entry(at index: Int) throws(ContainerError) -> ZipEntryInfo {
        let archive: OpaquePointer
        switch backend {
        case .directory(let za): archive = za
        case .localHeaders(_, let entries):
            // The scan took only STORED, unencrypted entries; links and directories have no
            // mode in a local header, and their names are not the layout's.
            return ZipEntryInfo(index: index, name: entries[index].name, size: entries[index].size)
        }
        libzipCalls.lock()
        defer { libzipCalls.unlock() }
        var st = zip_stat_t()
        zip_stat_init(&st)
        guard zip_stat_index(archive, zip_uint64_t(index), zip_flags_t(ZIP_FL_ENC_RAW), &st) == 0, let cName = st.name else {
            throw .unreadable(path: path, cause: Self.failure(zip_get_error(archive), entry: index))
        }
        let name = String(decoding: UnsafeRawBufferPointer(start: cName, count: strlen(cName)), as: UTF8.self)
        guard st.comp_method == ZIP_CM_STORE else { throw .forbiddenEntry(name: name, reason: "compressed") }
        guard st.encryption_method == ZIP_EM_NONE else { throw .forbiddenEntry(name: name, reason: "ZIP-encrypted") }
        var opsys: zip_uint8_t = 0
        var attributes: zip_uint32_t = 0
        if zip_file_get_external_attributes(archive, zip_uint64_t(index), 0, &opsys, &attributes) == 0,
           opsys == zip_uint8_t(ZIP_OPSYS_UNIX) {
            if n11_zip_attributes_are_symlink(attributes) != 0 { throw .forbiddenEntry(name: name, reason: "a symbolic link") }
            if n11_zip_attributes_are_directory(attributes) != 0 { throw .forbiddenEntry(name: name, reason: "a directory") }
        }
        guard st.size <= zip_uint64_t(Int64.max) else { throw .forbiddenEntry(name: name, reason: "of impossible size") }
        return ZipEntryInfo(index: index, name: name, size: Int64(st.size))
    }

    /// Streams one entry's bytes. libzip checks the CRC when the entry ends, unless
    /// `checkCRC` is false: for entries whose every byte an AEAD tag authenticates the CRC
    /// adds nothing but a second pass over the data (4% of a verify). Entries are STORED
    /// (`entry(at:)` refuses others), so the raw bytes libzip then hands out are the data.
    public func open(_ entry: ZipEntryInfo, checkCRC: Bool = true) throws(ContainerError) -> ByteSource {
        let archive: OpaquePointer
        switch backend {
        case .directory(let za): archive = za
        case .localHeaders(let file, let entries):
            return ScannedEntrySource(file: file, entry: entries[entry.index], checksCRC: checkCRC)
        }
        let flags = checkCRC ? zip_flags_t(0) : zip_flags_t(ZIP_FL_COMPRESSED)
        libzipCalls.lock()
        defer { libzipCalls.unlock() }
        guard let file = zip_fopen_index(archive, zip_uint64_t(entry.index), flags) else {
            throw .entryReadFailed(name: entry.name, cause: Self.failure(zip_get_error(archive)))
        }
        return ZipEntrySource(file: file, name: entry.name, owner: self, unchecked: checkCRC ? nil : entry.size)
    }
}

/// An open entry as a `ByteSource`; keeps its reader alive while it is read.
final class ZipEntrySource: ByteSource {
    private let file: OpaquePointer
    private let name: String
    private let owner: ZipReader
    /// Without a CRC check: the bytes left, after which the end is reported without asking
    /// libzip, which checks a stored entry's CRC on the read that finds its end whatever the
    /// flags (so a damaged byte early in a version 3 pack failed its last item too).
    private var left: Int64?

    init(file: OpaquePointer, name: String, owner: ZipReader, unchecked size: Int64? = nil) {
        self.file = file
        self.name = name
        self.owner = owner
        left = size
    }

    deinit {
        owner.libzipCalls.lock()
        zip_fclose(file)
        owner.libzipCalls.unlock()
    }

    func read(into buffer: inout [UInt8], offset: Int, count: Int) throws -> Int {
        precondition(offset + count <= buffer.count)
        let wanted = left.map { Int(min(Int64(count), $0)) } ?? count
        guard wanted > 0 else { return 0 }
        owner.libzipCalls.lock()
        let n = buffer.withUnsafeMutableBytes { raw in zip_fread(file, raw.baseAddress! + offset, zip_uint64_t(wanted)) }
        let failure = n < 0 ? ZipReader.failure(zip_file_get_error(file)) : nil
        owner.libzipCalls.unlock()
        if let failure { throw ContainerError.entryReadFailed(name: name, cause: failure) }
        if n == 0, let left, left > 0 { throw ContainerError.entryReadFailed(name: name, cause: .wrongLength) }
        left = left.map { $0 - Int64(n) }
        return Int(n)
    }
}

/// The bytes libzip reads of an arriving file: a position, and reads that wait for the bytes
/// (`ArrivingFile`). Its callback is a C function reaching it through the user-data pointer.
final class ArrivingZipSource {
    let file: ArrivingFile
    var position: Int64 = 0
    var error = zip_error_t()

    init(_ file: ArrivingFile) {
        self.file = file
        zip_error_init(&error)
    }

    deinit { zip_error_fini(&error) }

    func read(into buffer: UnsafeMutableRawPointer, count: Int) -> zip_int64_t {
        do {
            let n = try file.read(into: buffer, count: count, at: position)
            position += Int64(n)
            return zip_int64_t(n)
        } catch {
            // libzip keeps only an errno; the download's own failure is the arriving file's.
            zip_error_set(&self.error, ZIP_ER_READ, (error as? SystemError)?.errno ?? EIO)
            return -1
        }
    }
}

func arrivingSourceCallback(_ userdata: UnsafeMutableRawPointer?, _ data: UnsafeMutableRawPointer?,
                            _ length: zip_uint64_t, _ command: zip_source_cmd_t) -> zip_int64_t {
    guard let userdata else { return -1 }
    let source = Unmanaged<ArrivingZipSource>.fromOpaque(userdata).takeUnretainedValue()
    switch command {
    case ZIP_SOURCE_OPEN:
        source.position = 0
        return 0
    case ZIP_SOURCE_READ:
        guard let data else { return -1 }
        return source.read(into: data, count: Int(min(length, zip_uint64_t(Int.max))))
    case ZIP_SOURCE_CLOSE:
        return 0
    case ZIP_SOURCE_STAT:
        guard let data, length >= MemoryLayout<zip_stat_t>.size else { return -1 }
        let stat = data.assumingMemoryBound(to: zip_stat_t.self)
        zip_stat_init(stat)
        stat.pointee.size = zip_uint64_t(source.file.size)
        stat.pointee.valid |= zip_uint64_t(ZIP_STAT_SIZE)
        return zip_int64_t(MemoryLayout<zip_stat_t>.size)
    case ZIP_SOURCE_SEEK:
        let offset = zip_source_seek_compute_offset(zip_uint64_t(source.position), zip_uint64_t(source.file.size), data, length, &source.error)
        guard offset >= 0 else { return -1 }
        source.position = offset
        return 0
    case ZIP_SOURCE_TELL:
        return source.position
    case ZIP_SOURCE_ERROR:
        guard let data else { return -1 }
        return zip_error_to_data(&source.error, data, length)
    case ZIP_SOURCE_FREE:
        Unmanaged<ArrivingZipSource>.fromOpaque(userdata).release()
        return 0
    case ZIP_SOURCE_SUPPORTS:
        return n11_zip_supports_seekable()
    default:
        zip_error_set(&source.error, ZIP_ER_OPNOTSUPP, 0)
        return -1
    }
}
