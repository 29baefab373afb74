import Foundation

/// A Ciphio text message (seed 002): `ALG:BASE64(salt ‖ iv ‖ ciphertext)` with `ALG` one of
/// `gcm` (also when there is no prefix), `cbc`, `ctr`; a 16-byte salt, a 12-byte IV for GCM
/// (the 16-byte tag ends the ciphertext), 16 bytes for CBC and CTR. Only the layout: keys
/// and ciphers are the crypto layer's.
public struct CiphioMessage: Sendable, Equatable {
    public enum Algorithm: String, Sendable, CaseIterable {
        case gcm, cbc, ctr

        public var ivLength: Int { self == .gcm ? 12 : 16 }
        /// The shortest ciphertext: GCM's tag, one CBC block, nothing for CTR.
        var minimumCiphertext: Int {
            switch self {
            case .gcm: return 16
            case .cbc: return 16
            case .ctr: return 0
            }
        }
    }

    public static let saltLength = 16
    public let algorithm: Algorithm
    public let salt: [UInt8]
    public let iv: [UInt8]
    public let ciphertext: [UInt8]

    public init(algorithm: Algorithm, salt: [UInt8], iv: [UInt8], ciphertext: [UInt8]) {
        precondition(salt.count == Self.saltLength && iv.count == algorithm.ivLength)
        self.algorithm = algorithm
        self.salt = salt
        self.iv = iv
        self.ciphertext = ciphertext
    }

    /// The message as Ciphio writes it, always with its prefix.
    public var text: String { algorithm.rawValue + ":" + Data(salt + iv + ciphertext).base64EncodedString() }

    /// Reads a message; white space around it (a trailing newline) is ignored.
    public init(parsing raw: String) throws(FormatError) {
        let text = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        var algorithm = Algorithm.gcm
        var body = Substring(text)
        if let colon = text.firstIndex(of: ":") {
            let tag = text[..<colon].lowercased()
            guard let named = Algorithm(rawValue: tag) else {
                // The prefix is not shown: the input may be a secret given here by mistake.
                throw .invalidMessage("the text before its first ':' is not an algorithm (gcm, cbc or ctr)")
            }
            algorithm = named
            body = text[text.index(after: colon)...]
        }
        guard !body.isEmpty, let bytes = Data(base64Encoded: String(body)).map([UInt8].init) else {
            throw .invalidMessage("the message is not base64")
        }
        let head = Self.saltLength + algorithm.ivLength
        guard bytes.count >= head + algorithm.minimumCiphertext else {
            throw .invalidMessage("the message is too short for \(algorithm.rawValue) (\(bytes.count) bytes): truncated?")
        }
        if algorithm == .cbc && (bytes.count - head) % 16 != 0 {
            throw .invalidMessage("a cbc message's ciphertext must be whole 16-byte blocks: truncated?")
        }
        self.algorithm = algorithm
        salt = Array(bytes[0..<Self.saltLength])
        iv = Array(bytes[Self.saltLength..<head])
        ciphertext = Array(bytes[head...])
    }
}
