internal import CZip
import Glibc
import N11System

/// The file a `ZipWriter` writes the archive into, as a libzip source: our own exclusively
/// created temp file behind a 1 MiB write-behind buffer. libzip copies entries in 8 KiB
/// pieces and seeks back to every local header to fill in its CRC; through its own stdio
/// file that was about 180,000 write and 100,000 lseek calls for an archive of 20,000 notes,
/// a third of the writing thread's time. Here a header that is still in the buffer is
/// rewritten in memory, and data reaches the file in 1 MiB pwrites.
final class ZipOutputFile {
    let path: String
    private var fd: Int32
    /// Set when the file is someone else's (an `AtomicFile`'s): it is kept alive here, and
    /// neither closed nor removed, which is its owner's business.
    private let borrowed: FileDescriptor?
    private var buffer = [UInt8](unsafeUninitializedCapacity: 1 << 20) { _, count in count = 1 << 20 }
    /// File offset of `buffer[0]`, and how many bytes of the buffer are valid.
    private var bufferStart: Int64 = 0
    private var bufferLength = 0
    /// libzip's write position, and the end of what was flushed to the file so far.
    private var position: Int64 = 0
    private var flushedEnd: Int64 = 0
    /// What is final (`FinalPrefixObserver`): bytes below `declaredFinal` will not be written
    /// again. libzip writes an entry's local header, its data, then seeks back to rewrite the
    /// header with the CRC and seeks to the end again; once it is back at the end after such a
    /// rewrite, everything before is final. A write below `declaredFinal` voids the observer.
    var observer: FinalPrefixObserver?
    private var declaredFinal: Int64 = 0
    private var toldFinal: Int64 = 0
    private var rewroteSinceDeclared = false
    /// The first system error, handed back by `ZipWriter.finish()` as it is (disk full stays disk full).
    private(set) var failure: SystemError?
    var error = zip_error_t()

    /// Creates `path` (it must not exist), owner-only.
    init(creating path: String) throws(SystemError) {
        self.path = path
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SystemError("cannot create", path: path) }
        borrowed = nil
        zip_error_init(&error)
    }

    /// Writes into `file`, an empty file its owner makes durable, publishes or removes;
    /// errors name `path` (the archive the user asked for, not the owner's temp name).
    init(borrowing file: FileDescriptor, named path: String) {
        self.path = path
        fd = file.rawValue
        borrowed = file
        zip_error_init(&error)
    }

    deinit {
        if fd >= 0 && borrowed == nil { Glibc.close(fd) }
        zip_error_fini(&error)
    }

    private var end: Int64 { max(flushedEnd, bufferStart + Int64(bufferLength)) }

    func write(_ data: UnsafeRawPointer, count: Int) -> Bool {
        if count > 0, let observer {
            if position < declaredFinal {
                observer.finalPrefixWasRewritten()
                self.observer = nil
            } else if position < end {
                rewroteSinceDeclared = true
            }
        }
        // Writing outside the buffered range (a seek went elsewhere): start a new buffer there.
        if position < bufferStart || position > bufferStart + Int64(bufferLength) {
            guard flush() else { return false }
            bufferStart = position
        }
        var done = 0
        while done < count {
            var offset = Int(position - bufferStart)
            if offset == buffer.count {
                guard flush() else { return false }
                bufferStart = position
                offset = 0
            }
            let take = min(count - done, buffer.count - offset)
            buffer.withUnsafeMutableBytes { raw in
                (raw.baseAddress! + offset).copyMemory(from: data + done, byteCount: take)
            }
            done += take
            position += Int64(take)
            bufferLength = max(bufferLength, Int(position - bufferStart))
        }
        return true
    }

    func seek(offset: Int64, whence: Int32) -> Bool {
        let base: Int64
        switch whence {
        case SEEK_SET: base = 0
        case SEEK_CUR: base = position
        case SEEK_END: base = end
        default: return fail(SystemError("bad seek", path: path, errno: EINVAL))
        }
        guard base + offset >= 0 else { return fail(SystemError("seek before the start", path: path, errno: EINVAL)) }
        position = base + offset
        if rewroteSinceDeclared && position == end {
            rewroteSinceDeclared = false
            declare(final: end)
        }
        return true
    }

    /// Bytes below `final` will not change; the observer hears of those already in the file:
    /// not those still in the buffer, which may sit below others already written (a header
    /// rewritten in place).
    private func declare(final: Int64) {
        declaredFinal = max(declaredFinal, final)
        let told = min(declaredFinal, flushedEnd, bufferLength > 0 ? bufferStart : .max)
        if told > toldFinal, let observer {
            toldFinal = told
            observer.prefixIsFinal(upTo: told)
        }
    }

    var tell: Int64 { position }

    /// Writes the buffer out where it belongs.
    func flush() -> Bool {
        var done = 0
        while done < bufferLength {
            let n = buffer.withUnsafeBytes { raw in
                pwrite(fd, raw.baseAddress! + done, bufferLength - done, off_t(bufferStart) + off_t(done))
            }
            if n < 0 {
                if errno == EINTR { continue }
                return fail(SystemError("cannot write", path: path))
            }
            done += n
        }
        flushedEnd = max(flushedEnd, bufferStart + Int64(bufferLength))
        // The archive is fsynced once it is complete; started now, the writeback of each
        // megabyte overlaps the encryption of the next instead of all of it waiting for that
        // fsync (a fifth of create's wall time on the mixed set went to that wait). Not for an
        // empty flush: a count of 0 would mean "to the end of the file". A local header
        // rewritten later just dirties its page again; on devices that need stable pages
        // that rewrite may wait for the page's write to finish (a header per entry, no more).
        if bufferLength > 0 { FileDescriptor.startWriteback(fd, offset: bufferStart, count: bufferLength) }
        bufferStart += Int64(bufferLength)
        bufferLength = 0
        declare(final: declaredFinal)
        return true
    }

    /// libzip finished the archive: everything goes to the file, which is then closed.
    func commit() -> Bool {
        guard flush() else { return false }
        declare(final: end)
        if borrowed != nil {
            fd = -1
            return true
        }
        guard Glibc.close(fd) == 0 else {
            fd = -1
            return fail(SystemError("cannot write", path: path))
        }
        fd = -1
        return true
    }

    /// libzip gave up: the partial file goes.
    func rollback() {
        defer { fd = -1 }
        guard borrowed == nil else { return }
        if fd >= 0 { Glibc.close(fd) }
        unlink(path)
    }

    func fail(_ systemError: SystemError) -> Bool {
        if failure == nil { failure = systemError }
        zip_error_set(&error, ZIP_ER_WRITE, systemError.errno)
        return false
    }
}

/// The libzip callback of the archive output: a C function pointer, reaching the
/// `ZipOutputFile` through the opaque user-data pointer.
func outputSourceCallback(_ userdata: UnsafeMutableRawPointer?, _ data: UnsafeMutableRawPointer?,
                          _ length: zip_uint64_t, _ command: zip_source_cmd_t) -> zip_int64_t {
    guard let userdata else { return -1 }
    let output = Unmanaged<ZipOutputFile>.fromOpaque(userdata).takeUnretainedValue()
    switch command {
    case ZIP_SOURCE_STAT:
        // "No such file": libzip then starts a new, empty archive.
        zip_error_set(&output.error, ZIP_ER_READ, ENOENT)
        return -1
    case ZIP_SOURCE_BEGIN_WRITE:
        return 0
    case ZIP_SOURCE_WRITE:
        guard let data else { return -1 }
        return output.write(data, count: Int(length)) ? zip_int64_t(length) : -1
    case ZIP_SOURCE_SEEK_WRITE:
        guard let data, length >= MemoryLayout<zip_source_args_seek_t>.size else {
            zip_error_set(&output.error, ZIP_ER_INVAL, 0)
            return -1
        }
        let args = data.assumingMemoryBound(to: zip_source_args_seek_t.self).pointee
        return output.seek(offset: args.offset, whence: args.whence) ? 0 : -1
    case ZIP_SOURCE_TELL_WRITE:
        return output.tell
    case ZIP_SOURCE_COMMIT_WRITE:
        return output.commit() ? 0 : -1
    case ZIP_SOURCE_ROLLBACK_WRITE:
        output.rollback()
        return 0
    case ZIP_SOURCE_REMOVE:
        output.rollback()
        return 0
    case ZIP_SOURCE_ERROR:
        guard let data else { return -1 }
        return zip_error_to_data(&output.error, data, length)
    case ZIP_SOURCE_FREE:
        Unmanaged<ZipOutputFile>.fromOpaque(userdata).release()
        return 0
    case ZIP_SOURCE_SUPPORTS:
        return n11_zip_supports_writable()
    default:
        // Reading the archive back (OPEN, READ, SEEK, TELL, CLOSE): never needed for a new one.
        zip_error_set(&output.error, ZIP_ER_OPNOTSUPP, 0)
        return -1
    }
}
