internal import CZip
import Glibc
import N11System

/// Writes a ZIP of STORED entries with libzip. Entries are added with a factory; libzip pulls
/// each entry's bytes through a source callback while `finish()` runs, so no entry is ever
/// held in memory whole. libzip writes through `ZipOutputFile` into a file the caller owns
/// (an `AtomicFile`, which makes it durable and publishes it) or into a new file at `path`.
public final class ZipWriter {
    public let path: String
    private var archive: OpaquePointer?
    private var providers: [EntryProvider] = []
    /// One read buffer for every entry: libzip writes entries one after another, and a
    /// buffer per entry would cost 1 MiB per item until the archive is closed.
    private let buffer = TransferBuffer()

    private let output: ZipOutputFile

    /// Writes into `file` (empty, open for writing), which stays the caller's to sync, publish
    /// or remove; messages name `path`.
    public convenience init(writingTo file: FileDescriptor, named path: String) throws(ContainerError) {
        try self.init(output: ZipOutputFile(borrowing: file, named: path))
    }

    /// Creates `path` (exclusively, 0600) and writes into it; a failed write removes it.
    public convenience init(path: String) throws(ContainerError) {
        let output: ZipOutputFile
        do { output = try ZipOutputFile(creating: path) }
        catch { throw .writeFailed(path: path, cause: .system(error)) }
        try self.init(output: output)
    }

    private init(output: ZipOutputFile) throws(ContainerError) {
        self.output = output
        path = output.path
        var error = zip_error_t()
        zip_error_init(&error)
        defer { zip_error_fini(&error) }
        // libzip owns the source from here; the retain is released on ZIP_SOURCE_FREE.
        let context = Unmanaged.passRetained(output).toOpaque()
        guard let source = zip_source_function_create(outputSourceCallback, context, &error) else {
            Unmanaged<ZipOutputFile>.fromOpaque(context).release()
            output.rollback()
            throw .writeFailed(path: path, cause: Self.failure(&error))
        }
        guard let za = zip_open_from_source(source, ZIP_CREATE, &error) else {
            zip_source_free(source)
            output.rollback()
            throw .writeFailed(path: path, cause: Self.failure(&error))
        }
        archive = za
    }

    deinit { if let archive { zip_discard(archive) } }

    /// Adds an entry of exactly `size` bytes; `open` is called when libzip starts writing it.
    /// `modified` is in seconds since 1970 (a plain integer: no C type in this API).
    public func addEntry(name: String, size: Int64, modified: Int64,
                         open: @escaping () throws -> ByteSource) throws(ContainerError) {
        guard let za = archive else { throw .writeFailed(path: path, cause: .alreadyFinished) }
        let provider = EntryProvider(name: name, size: size, modified: time_t(modified), buffer: buffer, open: open)
        // libzip owns the source from here; the retain is released on ZIP_SOURCE_FREE.
        let context = Unmanaged.passRetained(provider).toOpaque()
        guard let source = zip_source_function(za, entrySourceCallback, context) else {
            Unmanaged<EntryProvider>.fromOpaque(context).release()
            throw .writeFailed(path: path, cause: Self.failure(zip_get_error(za)))
        }
        let index = zip_file_add(za, name, source, zip_flags_t(ZIP_FL_ENC_UTF_8))
        guard index >= 0 else {
            zip_source_free(source)
            throw .writeFailed(path: path, cause: Self.failure(zip_get_error(za)))
        }
        let i = zip_uint64_t(index)
        zip_set_file_compression(za, i, ZIP_CM_STORE, 0)
        zip_file_set_mtime(za, i, time_t(modified), 0)
        zip_file_set_external_attributes(za, i, 0, zip_uint8_t(ZIP_OPSYS_UNIX), zip_uint32_t(0o100600) << 16)
        providers.append(provider)
    }

    /// Tells `observer` how much of the file is final while `finish()` writes it.
    public func observeFinalPrefix(_ observer: FinalPrefixObserver) {
        output.observer = observer
    }

    /// Writes the whole archive. If an entry source threw, that error is rethrown as is.
    public func finish() throws {
        guard let za = archive else { return }
        archive = nil
        if zip_close(za) != 0 {
            let cause = Self.failure(zip_get_error(za))
            zip_discard(za)
            if let failure = providers.lazy.compactMap(\.failure).first { throw failure }
            // Disk full, read-only and the like reach the caller as the system error they are.
            if let failure = output.failure { throw failure }
            throw ContainerError.writeFailed(path: path, cause: cause)
        }
    }

    /// libzip's error as a value: its code, the errno behind it, its message.
    static func failure(_ error: UnsafeMutablePointer<zip_error_t>?) -> WriteFailure {
        guard let error else { return .libzip(code: 0, errno: 0, message: "unknown libzip error") }
        let errno = zip_error_system_type(error) == ZIP_ET_SYS ? zip_error_code_system(error) : 0
        return .libzip(code: zip_error_code_zip(error), errno: errno, message: String(cString: zip_error_strerror(error)))
    }

    static func message(_ code: Int32) -> String {
        var error = zip_error_t()
        zip_error_init_with_code(&error, code)
        defer { zip_error_fini(&error) }
        return String(cString: zip_error_strerror(&error))
    }
}

/// The bytes handed from an entry's source to libzip.
final class TransferBuffer {
    var bytes = [UInt8](repeating: 0, count: 1 << 20)
}

/// One entry's state while libzip pulls it.
final class EntryProvider {
    let name: String
    let size: Int64
    let modified: time_t
    let open: () throws -> ByteSource
    let buffer: TransferBuffer
    var source: ByteSource?
    var produced: Int64 = 0
    var failure: (any Error)?
    var error = zip_error_t()

    init(name: String, size: Int64, modified: time_t, buffer: TransferBuffer, open: @escaping () throws -> ByteSource) {
        self.name = name
        self.size = size
        self.modified = modified
        self.buffer = buffer
        self.open = open
        zip_error_init(&error)
    }

    deinit { zip_error_fini(&error) }

    func fail(_ error: any Error) -> zip_int64_t {
        failure = error
        zip_error_set(&self.error, ZIP_ER_READ, EIO)
        return -1
    }
}

/// The libzip source callback: a C function pointer, so it reaches the provider through
/// the opaque user-data pointer.
private func entrySourceCallback(_ userdata: UnsafeMutableRawPointer?, _ data: UnsafeMutableRawPointer?,
                                 _ length: zip_uint64_t, _ command: zip_source_cmd_t) -> zip_int64_t {
    guard let userdata else { return -1 }
    let provider = Unmanaged<EntryProvider>.fromOpaque(userdata).takeUnretainedValue()
    switch command {
    case ZIP_SOURCE_OPEN:
        do { provider.source = try provider.open() } catch { return provider.fail(error) }
        return 0
    case ZIP_SOURCE_READ:
        guard let data else { return -1 }
        guard let source = provider.source else { return 0 }   // already delivered in full
        let want = Int(min(length, zip_uint64_t(provider.buffer.bytes.count)))
        do {
            let n = try source.read(into: &provider.buffer.bytes, offset: 0, count: min(want, Int(provider.size - provider.produced)))
            provider.produced += Int64(n)
            if n == 0 && provider.produced != provider.size {
                throw ContainerError.writeFailed(path: provider.name, cause: .entryShort(produced: provider.produced, declared: provider.size))
            }
            provider.buffer.bytes.withUnsafeBytes { data.copyMemory(from: $0.baseAddress!, byteCount: n) }
            // libzip reads exactly the declared size and closes sources only when the whole
            // archive is written: once the entry has delivered everything, make sure its
            // source really ends there (a longer one must not be cut silently), then free its
            // pipeline and buffers.
            if provider.produced == provider.size {
                var probe = [UInt8](repeating: 0, count: 1)
                guard try source.read(into: &probe, offset: 0, count: 1) == 0 else {
                    throw ContainerError.writeFailed(path: provider.name, cause: .entryLong(declared: provider.size))
                }
                provider.source = nil
            }
            return zip_int64_t(n)
        } catch {
            provider.source = nil
            return provider.fail(error)
        }
    case ZIP_SOURCE_CLOSE:
        provider.source = nil
        return 0
    case ZIP_SOURCE_STAT:
        guard let data, length >= MemoryLayout<zip_stat_t>.size else { return -1 }
        let stat = data.assumingMemoryBound(to: zip_stat_t.self)
        zip_stat_init(stat)
        stat.pointee.size = zip_uint64_t(provider.size)
        stat.pointee.mtime = provider.modified
        stat.pointee.valid |= zip_uint64_t(ZIP_STAT_SIZE) | zip_uint64_t(ZIP_STAT_MTIME)
        return zip_int64_t(MemoryLayout<zip_stat_t>.size)
    case ZIP_SOURCE_ERROR:
        guard let data else { return -1 }
        return zip_error_to_data(&provider.error, data, length)
    case ZIP_SOURCE_FREE:
        Unmanaged<EntryProvider>.fromOpaque(userdata).release()
        return 0
    case ZIP_SOURCE_SUPPORTS:
        return n11_zip_supports_readable()
    default:
        zip_error_set(&provider.error, ZIP_ER_OPNOTSUPP, 0)
        return -1
    }
}
