import Foundation
import N11Crypto
import N11System

/// FileLock's encrypted file (seed 000): four chunks, each after its length as a big-endian
/// UInt32:
///
///     ECIES-wrapped AES key (113) ‖ nonce (12) ‖ AES-256-GCM ciphertext (n) ‖ tag (16)
///
/// The AES key is 32 random bytes wrapped with Apple's `eciesEncryptionCofactorX963SHA256AESGCM`
/// for the recipient's P-256 key. The whole file is one GCM message, so a package holds at
/// most 4 GiB − 1 of content. Both directions stream in 1 MiB pieces (bounded memory); the
/// output is a temp file beside it that becomes visible only when complete and, when
/// opening, only after the tag verified.
public enum FileLockPackage {
    static let wrappedKeyBytes = AppleECIES.overhead + 32
    static let nonceBytes = 12
    static let tagBytes = 16
    /// The four length fields and the fixed-size chunks.
    static let overhead = 4 * 4 + wrappedKeyBytes + nonceBytes + tagBytes
    public static let maximumContent = Int64(UInt32.max)
    static let piece = 1 << 20

    public struct Report: Sendable {
        public let output: String
        public let contentBytes: Int64
    }

    /// Encrypts `input` for `recipient` into a new file `output`.
    public static func seal(_ input: String, to recipient: P256PublicKey, output: String,
                            replaceExisting: Bool) throws(ArchiveError) -> Report {
        do {
            let source = try openInput(input)
            let size = try source.status().size
            guard size <= maximumContent else {
                throw ArchiveError.tooLarge("'\(input)' is \(size) bytes; a FileLock package holds at most 4 GiB − 1")
            }
            let file = try startOutput(output, replaceExisting: replaceExisting)
            let key = try SecureBytes(randomCount: 32)
            let nonce = SecureRandom.bytes(nonceBytes)
            let out = file.descriptor
            try out.write(chunk(try AppleECIES.seal(key, to: recipient)) + chunk(nonce) + bigEndian(UInt32(size)))
            let cipher = try AEADStream(.aes256GCM, key: key, nonce: nonce, encrypting: true)
            var buffer = [UInt8](repeating: 0, count: piece), sealed = [UInt8](repeating: 0, count: piece)
            var done: Int64 = 0
            while true {
                let n = try source.read(into: &buffer, count: buffer.count)
                if n == 0 { break }
                done += Int64(n)
                guard done <= size else { throw ArchiveError.damaged(archive: input, what: "it grew while it was being sealed") }
                try cipher.update(buffer, count: n, into: &sealed)
                try out.write(sealed[0..<n])
            }
            buffer.wipe()
            guard done == size else { throw ArchiveError.damaged(archive: input, what: "it shrank while it was being sealed") }
            try out.write(chunk(try cipher.finishSealing()))
            try commit(file, output, replaceExisting: replaceExisting)
            return Report(output: output, contentBytes: size)
        } catch { throw ArchiveError.wrap(error) }
    }

    /// Opens a package made for one of `identities` into a new file `output`.
    public static func unseal(_ input: String, identities: [P256PrivateKey], output: String,
                              replaceExisting: Bool) throws(ArchiveError) -> Report {
        do {
            let source = try openInput(input)
            let size = try source.status().size
            // Until the first two chunks' lengths are FileLock's, the file may be anything (an
            // archive, a photo given by mistake): it is called no package, not a damaged one.
            func notAPackage(_ what: String) -> ArchiveError { .fileLockPackage(path: input, what: what, isPackage: false) }
            func damaged(_ what: String) -> ArchiveError { .fileLockPackage(path: input, what: what, isPackage: true) }
            guard size >= Int64(overhead) else { throw notAPackage("it is too short to be one") }
            var head = [UInt8](repeating: 0, count: 4 + wrappedKeyBytes + 4 + nonceBytes + 4)
            guard try source.readFully(into: &head, count: head.count) == head.count else { throw damaged("truncated") }
            var reader = BigEndianReader(head)
            guard reader.length() == wrappedKeyBytes else { throw notAPackage("its first chunk is not a wrapped P-256 key of \(wrappedKeyBytes) bytes") }
            let wrapped = reader.take(wrappedKeyBytes)
            guard reader.length() == nonceBytes else { throw notAPackage("its nonce chunk is not \(nonceBytes) bytes") }
            let nonce = reader.take(nonceBytes)
            let contentSize = Int64(reader.length())
            guard Int64(head.count) + contentSize + 4 + Int64(tagBytes) == size else {
                throw damaged("its chunk lengths do not add up to its size (truncated or extended)")
            }
            var key: SecureBytes?
            for identity in identities {
                if let opened = try? AppleECIES.open(wrapped, with: identity), opened.count == 32 { key = opened; break }
            }
            guard let key else { throw ArchiveError.noKeyOpens(archive: input, recipientSlots: 1, passwordSlots: 0) }

            let file = try startOutput(output, replaceExisting: replaceExisting)
            let cipher = try AEADStream(.aes256GCM, key: key, nonce: nonce, encrypting: false)
            var buffer = [UInt8](repeating: 0, count: piece), plain = [UInt8](repeating: 0, count: piece)
            defer { plain.wipe() }
            var left = contentSize
            do {
                while left > 0 {
                    let want = Int(min(Int64(piece), left))
                    guard try source.readFully(into: &buffer, count: want) == want else { throw damaged("truncated") }
                    try cipher.update(buffer, count: want, into: &plain)
                    try file.descriptor.write(plain[0..<want])
                    left -= Int64(want)
                }
                var tail = [UInt8](repeating: 0, count: 4 + tagBytes + 1)
                let tailLength = try source.readFully(into: &tail, count: tail.count)
                var tailReader = BigEndianReader(Array(tail.prefix(tailLength)))
                guard tailReader.count == 4 + tagBytes, tailReader.length() == tagBytes else { throw damaged("the tag chunk is not \(tagBytes) bytes") }
                guard cipher.finishOpening(tag: tailReader.take(tagBytes)) else {
                    throw damaged("the tag does not verify (the content or its key was changed); nothing was written")
                }
            } catch {
                file.abort()
                throw error
            }
            try commit(file, output, replaceExisting: replaceExisting)
            return Report(output: output, contentBytes: contentSize)
        } catch { throw ArchiveError.wrap(error) }
    }

    private static func openInput(_ path: String) throws -> FileDescriptor {
        guard let status = try FileStatus.of(path, followLinks: true) else { throw ArchiveError.archiveMissing(path: path) }
        guard status.kind == .regular else { throw ArchiveError.notAnArchive(archive: path, why: "not a regular file") }
        return try FileDescriptor.openForReading(path)
    }

    private static func startOutput(_ output: String, replaceExisting: Bool) throws -> AtomicFile {
        if !replaceExisting, try FileStatus.of(output) != nil { throw ArchiveError.outputExists(path: output) }
        return try AtomicFile(path: output, mode: 0o600)
    }

    private static func commit(_ file: AtomicFile, _ output: String, replaceExisting: Bool) throws {
        do { try file.commit(replaceExisting: replaceExisting) }
        catch let error as SystemError where error.errno == EEXIST { throw ArchiveError.outputExists(path: output) }
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    private static func chunk(_ bytes: [UInt8]) -> [UInt8] { bigEndian(UInt32(bytes.count)) + bytes }

    private struct BigEndianReader {
        private let bytes: [UInt8]
        private var position = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        var count: Int { bytes.count }
        mutating func take(_ n: Int) -> [UInt8] {
            defer { position += n }
            return Array(bytes[position..<(position + n)])
        }
        mutating func length() -> Int {
            let b = take(4)
            return Int(b[0]) << 24 | Int(b[1]) << 16 | Int(b[2]) << 8 | Int(b[3])
        }
    }
}
