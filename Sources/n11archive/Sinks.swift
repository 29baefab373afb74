import N11Crypto
import N11System

/// Stages plaintext in an AtomicFile's temp file; the caller commits it only after the
/// read returned, i.e. after the tag verified. Plaintext on disk only because the user asked
/// for an export (`vault cat -o`).
final class StagedFileSink: UnverifiedPlaintextSink {
    private let file: AtomicFile
    init(_ file: AtomicFile) { self.file = file }
    func stage(_ bytes: ArraySlice<UInt8>) throws { try file.descriptor.write(bytes) }
}

/// stdout, used only for a second pass after a first pass verified the whole item.
final class StandardOutputSink: UnverifiedPlaintextSink {
    private let out = FileDescriptor(borrowing: 1, path: "stdout")
    func stage(_ bytes: ArraySlice<UInt8>) throws { try out.write(bytes) }
}

