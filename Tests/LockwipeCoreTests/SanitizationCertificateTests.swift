import Foundation
import LockwipeCore
import Testing

/// The certificate's method words are a claim an auditor files: these rows pin which
/// wipe gets which NIST words, and that a file-level method never claims a NIST type.
struct SanitizationCertificateTests {
    static let overwrite = WipeSummaryTextTests.overwrite
    static let crypto = WipeSummaryTextTests.crypto
    static let incomplete = WipeSummaryTextTests.incomplete
    static var unlinkOnly: WipeSummary {
        WipeSummary(filesOverwritten: 0, bytesOverwritten: 0, entriesRemoved: 3, skipped: [], elapsedSeconds: 0.01, passes: 0)
    }

    @Test(arguments: [
        (crypto, "Purge", "cryptographic erase", SanitizationCertificate.fscryptCipher as String?, 512 as Int?, nil as Int?),
        (overwrite, "file-level overwrite (1 pass, random)", "file-level overwrite", nil, nil, 1),
        (incomplete, "file-level overwrite (2 passes, zeros)", "file-level overwrite", nil, nil, 2),
        (unlinkOnly, "file-level unlink (no overwrite)", "file-level unlink", nil, nil, 0),
    ])
    func theMethod(_ s: WipeSummary, _ type: String, _ technique: String, _ cipher: String?, _ keyBits: Int?, _ passes: Int?) {
        let m = SanitizationCertificate.method(s)
        #expect(m.type == type)
        #expect(m.technique == technique)
        #expect(m.cipher == cipher)
        #expect(m.keyBits == keyBits)
        #expect(m.passes == passes)
        // Only a crypto-erase is given a NIST method type; every file-level method says it
        // is not media Clear.
        #expect((m.type == "Purge") == s.cryptoErased)
        #expect(s.cryptoErased || m.note?.contains("would not call this media Clear") == true)
    }

    /// What a remnant of the destroyed key on flash or a copy-on-write filesystem still
    /// opens with, by what protected the vault until the wipe.
    @Test(arguments: [
        (AtRest.tpm2 as AtRest?, "opens only with this machine's TPM2"),
        (.host, "opens with the machine key, which a copy of the disk holds (no TPM2)"),
        (.disk, "opens with the machine key, which a copy of the disk holds (no TPM2)"),
        (.passcode, "is open to offline guessing of the passcode"),
        (nil, nil as String?),
    ])
    func aCryptoEraseSaysWhatARemnantOfTheKeyOpensWith(_ atRest: AtRest?, _ phrase: String?) {
        let note = SanitizationCertificate.method(Self.crypto, atRest: atRest).note ?? ""
        #expect(note.hasPrefix("fscrypt encrypts file contents and names"))
        if let phrase {
            #expect(note.contains("a remnant of the wrapped key that flash or a copy-on-write filesystem kept " + phrase), "\(note)")
        } else {
            #expect(!note.contains("remnant"))
        }
        var certificate = Self.make(Self.crypto)
        certificate.subject.atRest = atRest
        #expect(certificate.textLines.contains { $0.hasPrefix("  at rest:") } == (atRest != nil))
        if let atRest { #expect(certificate.textLines.contains("  at rest:      \(atRest.sentence) (until the wipe)")) }
        // A key also sealed to the organisation's recovery key: its private key opens a remnant too.
        let recovered = SanitizationCertificate.method(Self.crypto, atRest: atRest, recoveryKey: "lwr-0011223344556677").note ?? ""
        #expect(recovered.hasSuffix("; the vault key was also sealed to the organisation's recovery key lwr-0011223344556677, whose private key opens such a remnant too"))
    }

    static func make(_ s: WipeSummary, requester: WipeRequester = WipeRequester(peerUID: 0)) -> SanitizationCertificate {
        SanitizationCertificate.make(
            id: "5f0c7a52-3c1e-4d2a-9d59-0b3c8d1e2f40", host: .init(hostname: "kiosk-7", machineID: "0123456789abcdef0123456789abcdef"),
            subject: .init(user: "alice", uid: 1001, directories: ["/srv/field/alice"], protection: "permissions"), trigger: .admin,
            reason: "wiped by administrator uid 0", requestedAt: "2027-01-01T00:00:00Z", requester: requester, attempt: 2, summary: s,
            started: "2027-01-01T00:00:01Z", finished: "2027-01-01T00:00:03Z",
            verification: [.init(check: "vault-empty", passed: s.complete, detail: "re-walked")], toolVersion: "9.9.9")
    }

    @Test func aCertificateCarriesTheReportsFacts() {
        var s = Self.incomplete
        s.media = [MediaFacts(path: "/srv/field/alice", filesystem: "btrfs", devices: [.init(name: "nvme0n1", rotational: false)])]
        s.caveats = [WipeCaveat(kind: .snapshots, path: "/srv/field/alice", detail: "1 snapshot")]
        let c = Self.make(s)
        #expect(c.result == "incomplete")
        #expect(c.exceptions == s.skipped)
        #expect(c.media == s.media)
        #expect(c.caveats == s.caveats)
        #expect(c.request.attempt == 2)
        #expect(c.tool.name == "lockwiped" && c.tool.version == "9.9.9")
        #expect(c.filesOverwritten == 1 && c.bytesOverwritten == 10 && c.entriesRemoved == 2)
        #expect(Self.make(Self.overwrite).result == "complete")
    }

    @Test func theTextForPeopleSaysWhatWasNotDone() {
        var s = Self.incomplete
        s.caveats = [WipeCaveat(kind: .copyOnWrite, path: "/srv/field/alice", detail: "btrfs writes new blocks")]
        let lines = Self.make(s, requester: WipeRequester(peerUID: 0, server: nil, policy: nil, retryLimit: 5)).textLines
        #expect(lines.first == "Certificate of sanitization 5f0c7a52-3c1e-4d2a-9d59-0b3c8d1e2f40")
        #expect(lines.contains("  requester:    peer uid 0; retry limit 5"))
        #expect(lines.contains("  result:       INCOMPLETE: 2 entries removed, 1 file overwritten (10 B)"))
        #expect(lines.contains("  exception:    /v/m: a mount point"))
        #expect(lines.contains("  verified:     NO, vault-empty: re-walked"))
        #expect(lines.contains("  caveat:       copy-on-write: /srv/field/alice: btrfs writes new blocks"))
        #expect(lines.contains("  media:        not read"))
        #expect(Self.make(Self.overwrite).textLines.contains("  caveats:      none detected"))
    }

    /// The wire's snake-case keys (peer_uid, machine_id, filesystem_uuid), spelt by the
    /// types themselves: the default coders write them and decode them back.
    @Test func snakeCaseRoundTrip() throws {
        var s = Self.overwrite
        s.media = [MediaFacts(path: "/v", filesystem: "ext4", filesystemUUID: "7c2f0f2e-0000-4000-8000-000000000001")]
        let c = Self.make(s)
        let data = try JSONEncoder().encode(c)
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains("\"peer_uid\":0") && text.contains("\"machine_id\"") && text.contains("\"filesystem_uuid\""))
        #expect(try JSONDecoder().decode(SanitizationCertificate.self, from: data) == c)
    }
}
