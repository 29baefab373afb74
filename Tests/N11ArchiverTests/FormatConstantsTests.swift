import Testing
import N11Crypto
import N11Format
import N11Vault

/// N11Format imports no crypto, so it states the numbers of FORMAT.md itself. These tie each
/// one to the layer that actually produces the bytes: a change on either side fails here, not
/// in an archive that no reader can open.
@Suite("The format's constants are the crypto layer's")
struct FormatConstantsTests {
    @Test func chunkLayoutMatchesTheSTREAMImplementation() {
        #expect(FormatLimits.chunkSize == ChunkedStream.chunkSize)
        #expect(FormatLimits.chunkTag == ChunkedStream.tagLength)
        #expect(FormatLimits.chunkTag == AEADAlgorithm.tagLength)
        #expect(FormatLimits.sealedLength(payloadSize: Int64(ChunkedStream.chunkSize)) == Int64(ChunkedStream.sealedChunkSize))
    }

    @Test func vaultFileOverheadIsTheSealedItemsOverhead() {
        #expect(FormatLimits.vaultFileOverhead == Int64(SealedVaultItem.overhead))
        #expect(SealedVaultItem.overhead == AEADAlgorithm.standardNonceLength + AEADAlgorithm.tagLength)
    }

    @Test func keyWrapIsOneSealedKey() {
        // nonce ‖ 32-byte content key ‖ tag
        #expect(FormatLimits.keyWrapBytes == AEADAlgorithm.standardNonceLength + 32 + AEADAlgorithm.tagLength)
    }

    @Test func kdfBoundsMatchArgon2id() {
        #expect(ArchiveHeader.KDF.maximumOps == Argon2Parameters.maximumOps)
        #expect(Argon2Parameters.minimumOps == 1, "the header accepts 1…maximumOps passes")
        #expect(ArchiveHeader.KDF.memoryKiBRange.lowerBound << 10 == Argon2Parameters.minimumMemoryBytes)
        #expect(ArchiveHeader.KDF.memoryKiBRange.upperBound << 10 == Argon2Parameters.maximumMemoryBytes)
        #expect(FormatLimits.kdfSaltBytes == Argon2id.saltLength)
    }
}
