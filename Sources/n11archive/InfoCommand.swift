import ArgumentParser
import Foundation
import N11Archiver
import N11Crypto
import N11Format
import N11System
import N11Vault

struct Info: ParsableCommand, ChoosesOutput {
    static let configuration = CommandConfiguration(
        abstract: "Show what can be known about an archive without any secret.",
        discussion: """
        Example:
          n11archive info vault.nu11vlt
        Version, mode, key slots and their Argon2id cost, sizes, and whether the archive is \
        signed and by which key (the signature is checked, with no key needed); where this \
        home trusts signers, whether restore would read it, and if not why.
        """)

    @Argument(help: ArgumentHelp("The archive: a path, or REMOTE:PATH on an rclone remote.", valueName: "FILE"), completion: .file()) var file: String
    @OptionGroup var store: StoreOptions
    @Option(help: ArgumentHelp("Where a remote archive is fetched to first (default: HOME/spool, 0700).", valueName: "DIR"), completion: .directory)
    var spool: String?
    @Flag(help: "Print one JSON document (also on failure).") var json = false


    struct Summary: Encodable {
        let outcome = "ok", command = "info"
        let durationSeconds = Output.durationSeconds
        let archive: String
        let formatVersion: Int
        let mode: String
        let archiveId: String
        let created: Date
        /// The ways in (version 1 archives: their one password or device key, shown as a slot).
        let slots: [Slot]
        let entries: Int
        /// Versions 1 and 2: one ZIP entry an item. Version 3 packs items, and their number
        /// is in the encrypted manifest: nil, with `pages` and `packs` instead.
        let items: Int?
        let pages: Int?
        let packs: Int?
        /// Version 3: the archives a restore of this one also reads (none for a full archive).
        let dependsOn: [String]?
        /// Version 3: the fingerprint (as `create` and `key list` show it) of the Ed25519 key
        /// whose signature of the header verified, and that key itself (hex).
        let signedBy: String?
        let signerKey: String?
        /// `none`, `verified` or `invalid` (the header changed after it was signed).
        let signature: String
        /// Whether this home's trust rule (`key trust`) would read it; nil without a rule.
        let trusted: Bool?
        /// Why not, when `trusted` is false.
        let notTrusted: String?
        /// The archive file's size; named as in `create`'s document, which reports the same.
        let archiveBytes: Int64
    }

    struct Slot: Encodable {
        let type: String
        let kdf: ArchiveHeader.KDF?
    }

    static func slots(of h: ArchiveHeader) -> [Slot] {
        if h.version == 1 { return [Slot(type: h.mode == .portable ? "password" : "device", kdf: h.kdf)] }
        return h.slots.map { slot in
            if case .password(let kdf, _) = slot { return Slot(type: slot.typeName, kdf: kdf) }
            return Slot(type: slot.typeName, kdf: nil)
        }
    }

    static func describe(_ slot: Slot) -> String {
        switch slot.type {
        case "password":
            guard let kdf = slot.kdf else { return "password" }
            return "password (Argon2id v\(kdf.version), \(kdf.opsLimit) passes, \(kdf.memoryKiB >> 10) MiB, parallelism \(kdf.parallelism))"
        case "p256": return "recipient (a P-256 public key; which one is not recorded)"
        default: return "device key (in the key store of the machine that made it)"
        }
    }

    func run() throws {
        let fetched = try SpoolFiles.fetch(file, spool: spool, home: store.resolvedHome, progress: nil)
        let reader = try ArchiveReader(path: fetched.path, name: fetched.name)
        let h = reader.header
        let packed = reader.packedLayout
        let trust = try SignerTrust.resolve(signedBy: [], home: store.resolvedHome)
        let refusal = trust.refusal(reader.signature, header: h, fileName: file)
        let summary = Summary(archive: file, formatVersion: h.version, mode: h.mode.rawValue, archiveId: h.archiveIDHex, created: h.created,
                              slots: Self.slots(of: h), entries: reader.entryCount, items: packed == nil ? reader.itemEntryCount : nil,
                              pages: packed?.pages, packs: packed?.packs, dependsOn: h.version >= 3 ? h.dependsOn.map(\.hex) : nil,
                              signedBy: reader.signer.map(SignerKeyFiles.fingerprint), signerKey: reader.signer?.bytes.hex,
                              signature: { switch reader.signature { case .unsigned: "none"; case .verified: "verified"; case .invalid: "invalid" } }(),
                              trusted: trust.isActive ? refusal == nil : nil, notTrusted: refusal?.description,
                              archiveBytes: reader.fileSize)
        if json { try Console.json(summary); return }
        Console.out("archive:  \(file)")
        Console.out("format:   n11archive version \(h.version)")
        Console.out("mode:     \(h.mode.rawValue)\(h.mode == .secure ? " (restorable only with the key store that made it)" : "")")
        Console.out("id:       \(h.archiveIDHex)")
        Console.out("created:  \(Timestamp.string(h.created, withFraction: false))")
        for (n, slot) in summary.slots.enumerated() {
            Console.out("\(n == 0 ? "opens by:" : "         ") \(Self.describe(slot))")
        }
        if h.version >= 3 {
            Console.out("kind:     \(h.dependsOn.isEmpty ? "full" : "incremental: a restore also reads \(h.dependsOn.count) archive(s) beside it, found by ID: " + h.dependsOn.map(\.hex).joined(separator: ", "))")
        }
        if let packed {
            Console.out("items:    packed in \(packed.packs) pack(s), listed in \(packed.pages) manifest page(s); how many is inside the encryption (`list` shows them) (\(summary.entries) ZIP entries)")
            switch reader.signature {
            case .unsigned: Console.out("signed:   no")
            case .verified(let key): Console.out("signed:   by Ed25519 key \(SignerKeyFiles.fingerprint(key)) (the signature verifies; key \(key.bytes.hex))")
            case .invalid: Console.out("signed:   its signature does NOT verify: the header was changed after it was signed (nothing will read it)")
            }
        } else {
            Console.out("items:    \(reader.itemEntryCount) (\(summary.entries) ZIP entries)")
            Console.out("signed:   no (version \(h.version) archives never are)")
        }
        if summary.trusted != nil {
            Console.out("trusted:  \(refusal.map { "no: \($0)" } ?? "yes, by this home's trusted signers")")
        }
        Console.out("size:     \(Console.byteCount(reader.fileSize))")
    }
}
