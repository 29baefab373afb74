import Glibc
import Testing
import N11Container
import N11Crypto
import N11Format
import N11System
@testable import N11Vault
@testable import N11Archiver

/// Layer errors keep the error they wrap (its kind, message and hint, and the value itself),
/// and never invent a system errno for something that was no system call.
@Suite("Errors keep their cause")
struct ErrorCauseTests {
    struct PasswordSourceFailed: CategorizedError {
        var kind: FailureKind { .usage }
        var description: String { "the password file is empty" }
        var hint: String? { "put the password on its first line" }
    }
    struct Foreign: Error {}

    @Test func aCallersErrorIsKeptWithItsHint() {
        for error in [ArchiveError.creating("/tmp/a.nu11vlt", PasswordSourceFailed()), ArchiveError.wrap(PasswordSourceFailed()),
                      ArchiveError.wrap(VaultError.wrap(PasswordSourceFailed()))] {
            #expect(error.kind == .usage && error.hint == "put the password on its first line", "\(error)")
            #expect(error.description == "the password file is empty")
        }
        guard case .caller(let cause) = ArchiveError.wrap(PasswordSourceFailed()) else { Issue.record("not kept"); return }
        #expect(cause is PasswordSourceFailed)
    }

    @Test func aContainerFailureStaysAContainerFailure() {
        let error = ArchiveError.creating("/tmp/a.nu11vlt", ContainerError.writeFailed(path: "/tmp/a.nu11vlt",
                                                                                        cause: .libzip(code: 14, errno: 0, message: "libzip said no")))
        #expect(error.caseName == "container")
        #expect(error.kind == .ioFailure)
        #expect(!error.description.contains("Input/output error"), "no invented EIO: \(error)")
        // libzip's errno behind its error is kept, and says what kind of failure it was.
        let readOnly = ContainerError.writeFailed(path: "/tmp/a.nu11vlt", cause: .libzip(code: 5, errno: EROFS, message: "Read error"))
        #expect(readOnly.kind == SystemError("write", errno: EROFS).kind)
        #expect(readOnly.hint != nil && readOnly.hint == SystemError("write", errno: EROFS).hint)
        guard case .writeFailed(_, .libzip(let code, let errno, _)) = readOnly else { Issue.record("cause lost"); return }
        #expect(code == 5 && errno == EROFS)
    }

    @Test("damage keeps the lower layer's error as a value, and the item it is in")
    func damageKeepsItsCause() {
        guard case .damaged(_, .item(let id, .crypto(let cause))) = ArchiveError.itemFailed(archive: "a.nu11vlt", id: "X", CryptoError.contentMismatch)
        else { Issue.record("cause flattened"); return }
        #expect(id == "X" && cause == .contentMismatch)
        guard case .damaged(_, .format(.invalidManifest)) = ArchiveError.reading("a.nu11vlt", FormatError.invalidManifest("x")) else {
            Issue.record("cause flattened"); return
        }
        let message = ArchiveError.itemFailed(archive: "a.nu11vlt", id: "X", CryptoError.contentMismatch).description
        #expect(message == "'a.nu11vlt' is damaged or was tampered with: item X: \(CryptoError.contentMismatch)")
    }

    @Test func anUnknownErrorIsNotDressedAsASystemError() {
        let error = ArchiveError.creating("/tmp/a.nu11vlt", Foreign())
        #expect(error.caseName == "caller" && error.kind == .other)
        #expect(!error.description.contains("Input/output error"))
        guard case .caller(let cause as UnclassifiedError) = error else { Issue.record("cause lost"); return }
        #expect(cause.cause is Foreign)
    }
}
