import Foundation

/// PEM armour (RFC 7468): `-----BEGIN LABEL-----`, base64 of the content, `-----END LABEL-----`.
/// Only the armour; what the bytes mean is for the crypto layer.
public struct PEMBlock: Sendable, Equatable {
    public let label: String
    public let bytes: [UInt8]

    public init(label: String, bytes: [UInt8]) {
        self.label = label
        self.bytes = bytes
    }

    /// The block as text, base64 in lines of 64 characters (as OpenSSL and FileLock write it).
    public var text: String {
        let encoded = Data(bytes).base64EncodedString()
        var lines = ["-----BEGIN \(label)-----"]
        var start = encoded.startIndex
        while start < encoded.endIndex {
            let end = encoded.index(start, offsetBy: 64, limitedBy: encoded.endIndex) ?? encoded.endIndex
            lines.append(String(encoded[start..<end]))
            start = end
        }
        lines.append("-----END \(label)-----")
        return lines.joined(separator: "\n") + "\n"
    }

    /// Every block in `text`, in order. Text outside blocks is ignored (OpenSSL's reader
    /// does the same); a block that does not end, ends with another label, or whose content
    /// is not base64 is refused.
    public static func blocks(in text: String) throws(FormatError) -> [PEMBlock] {
        var found: [PEMBlock] = []
        var label: String?
        var body = ""
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" }) {
            let line = rawLine.trimmingCharacters(in: .whitespaces.union(CharacterSet(charactersIn: "\r")))
            if let open = label {
                if line.hasPrefix("-----END ") {
                    guard line == "-----END \(open)-----" else { throw .invalidKeyFile("a '\(open)' block is closed by an END line of another label") }
                    guard let bytes = Data(base64Encoded: body), !bytes.isEmpty else { throw .invalidKeyFile("the '\(open)' block is not base64") }
                    found.append(PEMBlock(label: open, bytes: [UInt8](bytes)))
                    label = nil
                    body = ""
                } else {
                    body += line
                }
            } else if line.hasPrefix("-----BEGIN "), line.hasSuffix("-----") {
                label = String(line.dropFirst("-----BEGIN ".count).dropLast("-----".count))
            }
        }
        if let label { throw .invalidKeyFile("the '\(label)' block has no END line") }
        return found
    }
}
