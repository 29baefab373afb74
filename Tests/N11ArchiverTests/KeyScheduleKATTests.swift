import Testing
import N11Crypto
import N11Format
import N11System
@testable import N11Archiver

/// Fixed-key known answers for the two parts of FORMAT.md §5 that a round trip cannot catch
/// (both sides would agree on a wrong constant): the HKDF info string of entry keys and the
/// STREAM nonce layout. The expected values were computed independently from FORMAT.md with
/// Python's `cryptography` package:
///
///     HKDF(SHA256, length=32, salt=bytes(range(0xa0, 0xb0)),
///          info=b"n11archive/v1/entry/" + name).derive(bytes(range(32)))
///     AESGCM(bytes(range(0x40, 0x60))).encrypt(i.to_bytes(11, "big") + bytes([last]), chunk, None)
///
/// over the plaintext `bytes(i % 251 for i in range(65541))` in chunks of 65536.
@Suite("Key schedule known answers (FORMAT.md §5)")
struct KeyScheduleKATTests {
    static let contentKey = try! SecureBytes(copying: Array(0..<32))
    static let archiveID: [UInt8] = Array(0xa0..<0xb0)

    func entryKey(_ name: String) throws -> String {
        let header = try ArchiveHeader(mode: .secure, archiveID: Self.archiveID, created: .init(timeIntervalSince1970: 0), kdf: nil)
        let key = try ArchiveKeys.entryKey(contentKey: Self.contentKey, header: header, entryName: name)
        return key.withUnsafeBytes { Array($0) }.hex
    }

    @Test func entryKeysUseTheDocumentedInfoString() throws {
        #expect(try entryKey("manifest.json") == "a4944fd58edb178a6909ea2eba08abb99d542c7f30ff5afad3910d63e4e5dc5a")
        #expect(try entryKey("Photos/F51BBF55-EE49-4D5C-BBA7-8748C8641674.n11")
                == "478fbe48e68ac1c04e2358bedc76a17f27a0e8cea43caaf9968414a7895dd9d5")
    }

    @Test func streamNoncesAreCounterThenLastFlag() throws {
        let key = try SecureBytes(copying: Array(0x40..<0x60))
        let plaintext = (0..<65541).map { UInt8($0 % 251) }
        let sealed = try ChunkedStream.seal(plaintext, key: key)
        #expect(sealed.count == 65573)
        #expect(Array(sealed[65536..<65552]).hex == "eab463b5867a81c32320489dd0ba8724", "chunk 0: counter 0, not last")
        #expect(Array(sealed.suffix(16)).hex == "75d7ce68cd341a86de13dfbd107a2b02", "chunk 1: counter 1, last")
        #expect(try SHA256Digest.hash(sealed).hex == "1dbbe62278f5865ed44fdee17c2e399af02373064f8617764330bf3c96adfafb")
    }
}
