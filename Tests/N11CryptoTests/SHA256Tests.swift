import Foundation
import Testing
@testable import N11Crypto
import N11System

/// SHA-256 digests are recorded (`vault add`) and compared (restore, verify): a failed
/// OpenSSL call must surface as an error, never as digest bytes.
@Suite("SHA-256: known answers, and failures that never become a digest")
struct SHA256Tests {
    @Test("FIPS 180-2 known answers, in one call and in pieces; the context restarts after finish")
    func knownAnswers() throws {
        #expect(try SHA256Digest.hash(Array("abc".utf8)).hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(try SHA256Digest.hash([]).hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        let message = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        let digest = try SHA256Digest()
        digest.update(message[..<10])
        digest.update(message[10...])
        #expect(try digest.finish().hex == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        digest.update(Array("abc".utf8)[...])
        #expect(try digest.finish().hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test("a context whose initialisation failed throws at finish, with OpenSSL's error, instead of giving an all-zero digest")
    func failedInitThrows() throws {
        // No digest algorithm: EVP_DigestInit_ex fails, as it would on a library error.
        let broken = try SHA256Digest(algorithm: nil)
        broken.update(Array("abc".utf8)[...])
        let failure = #expect(throws: CryptoError.self) { _ = try broken.finish() }
        // The operation, and OpenSSL's own error, kept as a value (not flattened, not dropped).
        guard case .library(let operation, let openSSL)? = failure else { Issue.record("not a library failure: \(String(describing: failure))"); return }
        #expect(operation == "EVP_DigestInit_ex")
        #expect(openSSL.map { $0.code != 0 && $0.reason.contains("no digest set") } == true, "\(String(describing: openSSL))")
        // Nothing hashed at all: still an error, not the digest of the empty string.
        #expect(throws: CryptoError.self) { _ = try SHA256Digest(algorithm: nil).finish() }
    }

    @Test("SHA-1 (FIPS 180-2) and MD5 (RFC 1321) known answers, for comparing uploads with a remote's hash")
    func transferHashes() throws {
        func hex(_ digest: MessageDigest, _ pieces: [String]) throws -> String {
            for piece in pieces { digest.update(Array(piece.utf8)[...]) }
            return try digest.finish().hex
        }
        #expect(try hex(SHA1Digest(), ["abc"]) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(try hex(SHA1Digest(), ["abcdbcdecdefdefgefghfghighijh", "ijkijkljklmklmnlmnomnopnopq"]) == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
        #expect(try hex(MD5Digest(), []) == "d41d8cd98f00b204e9800998ecf8427e")
        #expect(try hex(MD5Digest(), ["a", "bc"]) == "900150983cd24fb0d6963f7d28e17f72")
        #expect(try hex(MD5Digest(), ["message digest"]) == "f96b697d7cb7938d525a2f31aaf161d0")
    }
}
