import Crypto
import LockwipeCore
import Testing

/// A sealed outbox opens with the organisation's private key to the files sealed, byte for
/// byte and with their paths; with any other key, or changed, cut or reordered, it opens
/// to nothing.
@Suite struct OutboxSealTests {
    let organisation = Curve25519.KeyAgreement.PrivateKey()
    let header = OutboxHeader(recipient: "", registration: RegistrationID("0123abcd"), user: "alice", sealedAt: 1_790_000_000, reason: "logout")

    func files() -> [OutboxFile] {
        // 50 records, one of them larger than a chunk, one empty.
        (0..<50).map { i in
            let size = i == 7 ? OutboxSealer.chunkSize * 2 + 123 : i == 8 ? 0 : 100 + i
            return OutboxFile(
                path: "/srv/vault/alice/outbox/record-\(i).json", mode: 0o600, modified: 1_790_000_000 - Int64(i),
                contents: (0..<size).map { UInt8(($0 * 7 + i) & 0xFF) })
        }
    }

    func seal(_ files: [OutboxFile], to key: Curve25519.KeyAgreement.PublicKey? = nil) throws -> [UInt8] {
        var sealer = try OutboxSealer(to: RecoveryPublicKey(key ?? organisation.publicKey), header: header)
        var out = sealer.take()
        for f in files {
            try sealer.beginFile(path: f.path, mode: f.mode, modified: f.modified)
            // Fed in pieces of odd sizes, as a read loop would.
            var rest = f.contents[...]
            while !rest.isEmpty {
                let piece = Array(rest.prefix(5000))
                try piece.withUnsafeBytes { try sealer.append($0) }
                rest = rest.dropFirst(piece.count)
            }
            try sealer.endFile()
            out += sealer.take()
        }
        try sealer.finish()
        return out + sealer.take()
    }

    @Test func itOpensToTheSameFilesByteForByteWithThePrivateKey() throws {
        let sealed = try seal(files())
        let (h, opened) = try OutboxOpener.open(sealed, privateKey: organisation)
        #expect(opened == files())
        #expect(h.user == "alice" && h.registration == RegistrationID("0123abcd") && h.reason == "logout" && h.sealedAt == 1_790_000_000)
        #expect(h.recipient == RecoveryPublicKey(organisation.publicKey).identifier)
        // The header is readable without the key; the contents are not in the clear.
        #expect(try OutboxOpener.header(sealed) == h)
        let record = files()[3].contents
        #expect(sealed.firstRange(of: record) == nil)
    }

    @Test func anEmptyOutboxOpensToNoFiles() throws {
        #expect(try OutboxOpener.open(seal([]), privateKey: organisation).1 == [])
    }

    @Test func anotherKeyIsNamedAndOpensNothing() throws {
        let other = Curve25519.KeyAgreement.PrivateKey()
        let sealed = try seal(files())
        #expect(
            throws: OutboxSealError(
                "it is sealed to the key \(RecoveryPublicKey(organisation.publicKey).identifier), and this private key is \(RecoveryPublicKey(other.publicKey).identifier)")
        ) { try OutboxOpener.open(sealed, privateKey: other) }
    }

    @Test(arguments: ["header", "truncated at a chunk", "truncated", "chunks swapped", "byte flipped", "not an outbox"])
    func aChangedCopyDoesNotOpen(_ change: String) throws {
        var sealed = try seal(files())
        let prologue = sealed.count - chunks(sealed).reduce(0) { $0 + 4 + $1.count }
        switch change {
        case "header":
            // "alice" becomes "alicf": the header is authenticated by every chunk.
            let at = sealed.firstRange(of: Array("alice".utf8))!.upperBound - 1
            sealed[at] ^= 0x03
        case "truncated at a chunk":
            sealed.removeLast(chunks(sealed).last!.count + 4)
        case "truncated": sealed.removeLast(10)
        case "chunks swapped":
            let c = chunks(sealed)
            sealed = Array(sealed[..<prologue]) + frame(c[1]) + frame(c[0]) + c.dropFirst(2).flatMap(frame)
        case "byte flipped": sealed[prologue + 100] ^= 1
        default: sealed = Array("not a sealed outbox at all".utf8)
        }
        #expect(throws: OutboxSealError.self) { try OutboxOpener.open(sealed, privateKey: organisation) }
    }

    @Test func aRecoveryWrapIsNoOutboxAndAnOutboxKeyIsNoRecoveryWrap() throws {
        // The two use different HPKE info strings: one sealed as the other never opens.
        let recipient = RecoveryPublicKey(organisation.publicKey)
        let wrap = try RecoveryKey.wrap(Array(repeating: 1, count: 64), to: recipient, registration: header.registration)
        var sealer = try OutboxSealer(to: recipient, header: header)
        var bytes = sealer.take()
        bytes.removeLast(32)
        bytes += Array(wrap.encapsulated)
        let chunk = Array(wrap.sealed)
        let length = UInt32(chunk.count)
        bytes += [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + chunk
        #expect(throws: OutboxSealError.self) { try OutboxOpener.open(bytes, privateKey: organisation) }
    }

    func chunks(_ sealed: [UInt8]) -> [[UInt8]] {
        // Walks back from the end is not possible; parse from the prologue instead.
        var offset = 9
        for _ in 0..<6 { offset += 2 + (Int(sealed[offset]) << 8 | Int(sealed[offset + 1])) }
        var result: [[UInt8]] = []
        while offset < sealed.count {
            let n = sealed[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            result.append(Array(sealed[offset + 4..<offset + 4 + n]))
            offset += 4 + n
        }
        return result
    }

    func frame(_ chunk: [UInt8]) -> [UInt8] {
        let n = UInt32(chunk.count)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + chunk
    }
}

/// When an outbox is sealed, waited for and destroyed: a table over every moment and trigger.
@Suite struct OutboxSealingTests {
    typealias Row = (OutboxSealing.Moment, Trigger, OutboxConfiguration.OfflineWipe, seals: Bool, waits: Bool, destroys: Bool)
    static let rows: [Row] = [
        (.lock, .logout, .destroy, true, false, false),
        (.lock, .server, .destroy, true, false, false),
        (.lock, .admin, .destroy, true, false, false),
        (.lock, .user, .destroy, true, false, false),
        (.lock, .offline, .destroy, false, false, false),
        (.lock, .offline, .keep, false, false, false),
        (.lock, .retryLimit, .destroy, false, false, false),
        (.lock, .resume, .destroy, false, false, false),
        (.wipe, .server, .destroy, true, true, false),
        (.wipe, .admin, .destroy, true, true, false),
        (.wipe, .user, .destroy, true, true, false),
        (.wipe, .offline, .destroy, false, false, true),
        (.wipe, .offline, .keep, true, false, false),
        (.wipe, .retryLimit, .destroy, false, false, true),
        (.wipe, .retryLimit, .keep, true, false, false),
        (.wipe, .resume, .destroy, false, false, false),
        (.unregister, .admin, .destroy, true, true, false),
    ]

    @Test(arguments: 0..<rows.count) func eachMomentAndTrigger(_ i: Int) {
        let (moment, trigger, offline, seals, waits, destroys) = Self.rows[i]
        #expect(OutboxSealing.seals(before: moment, trigger: trigger, offlineWipe: offline) == seals, "\(moment) \(trigger) \(offline)")
        #expect(OutboxSealing.waitsForUpload(before: moment, trigger: trigger) == waits, "\(moment) \(trigger)")
        #expect(OutboxSealing.destroysKept(before: moment, trigger: trigger, offlineWipe: offline) == destroys, "\(moment) \(trigger) \(offline)")
    }

    @Test func theCertificateSaysWhatBecameOfTheOutbox() {
        typealias Copy = SanitizationCertificate.Outbox.Copy
        let received = Copy(name: "a.lwo", sha256: "ab", bytes: 10, uploaded: true, receipt: "r1", httpStatus: 201, problem: nil)
        let lost = Copy(name: "b.lwo", sha256: "cd", bytes: 20, uploaded: false, receipt: nil, httpStatus: nil, problem: "timed out")
        #expect(SanitizationCertificate.Outbox.decide(seal: "sealed", sealFailed: false, copies: [received], destroyed: nil)?.handling == "uploaded")
        #expect(SanitizationCertificate.Outbox.decide(seal: "sealed", sealFailed: false, copies: [received, lost], destroyed: nil)?.handling == "kept")
        #expect(SanitizationCertificate.Outbox.decide(seal: nil, sealFailed: false, copies: [], destroyed: "gone")?.handling == "destroyed")
        #expect(SanitizationCertificate.Outbox.decide(seal: "not sealed: x", sealFailed: true, copies: [], destroyed: nil)?.handling == "not-sealed")
        #expect(SanitizationCertificate.Outbox.decide(seal: "empty, nothing sealed", sealFailed: false, copies: [], destroyed: nil)?.handling == "empty")
        #expect(SanitizationCertificate.Outbox.decide(seal: nil, sealFailed: false, copies: [], destroyed: nil) == nil)
    }

    @Test(
        arguments: [
            (201, "abc", OutboxUploadAnswer.received(status: 201, receipt: "abc")),
            (204, nil, .received(status: 204, receipt: nil)),
            (201, "a b\u{7}c", .received(status: 201, receipt: "abc")),
            (401, nil, .notUploaded("the server refused the registration's credentials (HTTP 401)")),
            (404, nil, .notUploaded("the server has no outbox upload endpoint (HTTP 404)")),
            (413, nil, .notUploaded("the sealed outbox is larger than the server accepts (HTTP 413)")),
            (500, nil, .notUploaded("the server answered HTTP 500")),
        ] as [(Int, String?, OutboxUploadAnswer)])
    func uploadAnswers(_ status: Int, _ receipt: String?, _ expected: OutboxUploadAnswer) {
        #expect(OutboxUploadAnswer.classify(status: status, receipt: receipt) == expected)
    }

    @Test(
        arguments: [
            ("outbox", nil), ("app/outbox", nil), ("/srv/outbox", "must be relative"), ("../x", "must stay inside"), ("a/./b", "must stay inside"),
            ("", "without empty components"), ("a//b", "without empty components"), ("a/", "without empty components"),
        ] as [(String, String?)])
    func outboxDirectories(_ text: String, _ problem: String?) {
        let found = OutboxConfiguration.directoryProblem(text)
        if let problem { #expect(found?.contains(problem) == true, "\(text): \(found ?? "nil")") } else { #expect(found == nil, "\(text)") }
    }
}
