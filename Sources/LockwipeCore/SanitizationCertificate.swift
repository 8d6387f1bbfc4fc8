/// Who or what asked for a wipe, beyond its trigger: the peer of a `lockwipectl wipe`,
/// the policy server, the offline policy, or the passcode policy's retry limit. Stored
/// with the wipe's intent, so a wipe resumed after a restart still names its requester.
public struct WipeRequester: Codable, Sendable, Equatable {
    /// The Unix uid of the `lockwipectl` peer (trigger admin or user).
    public var peerUID: UInt32?
    /// The policy server's URL (trigger server).
    public var server: String?
    /// The offline policy in force, in words (trigger offline).
    public var policy: String?
    /// The passcode policy's retry limit that was reached (trigger retry-limit).
    public var retryLimit: Int?

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case server, policy
        case retryLimit = "retry_limit"
        case peerUID = "peer_uid"
    }

    public init(peerUID: UInt32? = nil, server: String? = nil, policy: String? = nil, retryLimit: Int? = nil) {
        self.peerUID = peerUID
        self.server = server
        self.policy = policy
        self.retryLimit = retryLimit
    }
}

/// A record of one wipe attempt, complete or not, in the terms of NIST SP 800-88 (method
/// types of Rev. 2; fields after Rev. 1's sample certificate of sanitization, Appendix G:
/// media, method type and method, tool and version, verification, date; see
/// docs/certificates.md): what an auditor files for each wiped medium. Built by `make`, a pure function of what the wipe reported; the
/// daemon stores it in the same transaction as the wipe's result.
public struct SanitizationCertificate: Codable, Sendable, Equatable {
    public struct Host: Codable, Sendable, Equatable {
        public var hostname: String
        /// An application-specific id derived from /etc/machine-id (the same as the SAP
        /// device id lockwiped sends); the machine id itself is never shown. Nil when the
        /// machine id cannot be read.
        public var machineID: String?
        // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
        enum CodingKeys: String, CodingKey {
            case hostname
            case machineID = "machine_id"
        }
        public init(hostname: String, machineID: String?) {
            self.hostname = hostname
            self.machineID = machineID
        }
    }

    public struct Subject: Codable, Sendable, Equatable {
        public var user: String
        public var uid: UInt32
        public var directories: [String]
        /// "encrypted" (fscrypt vault) or "permissions".
        public var protection: String
        /// Its protection at rest until the wipe: what a copy of the disk taken before it
        /// gets (`AtRest`); absent in certificates of older versions.
        public var atRest: AtRest?
        public init(user: String, uid: UInt32, directories: [String], protection: String, atRest: AtRest? = nil) {
            self.user = user
            self.uid = uid
            self.directories = directories
            self.protection = protection
            self.atRest = atRest
        }

        enum CodingKeys: String, CodingKey {
            case user, uid, directories, protection
            case atRest = "at_rest"
        }
    }

    public struct Request: Codable, Sendable, Equatable {
        public var trigger: Trigger
        public var reason: String
        /// When the wipe was committed (ISO 8601, UTC).
        public var requestedAt: String
        public var requester: WipeRequester
        /// The attempt this certificate is about: 1 for the first, more after a resume
        /// or a retry of an incomplete wipe.
        public var attempt: Int
        /// The registration's offline lease granted before the wipe was requested, if any
        /// (README, "Leases"): whether it was still in force then, or had ended.
        public var lease: Lease? = nil

        // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
        enum CodingKeys: String, CodingKey {
            case trigger, reason
            case requestedAt = "requested_at"
            case requester, attempt, lease
        }
    }

    /// An offline lease as a certificate names it.
    public struct Lease: Codable, Sendable, Equatable {
        /// ISO 8601, UTC.
        public var until: String
        public var grantedAt: String
        /// "offline-code" or "server".
        public var source: String
        /// The challenge an offline code answered, or the policy server's URL.
        public var reference: String
        /// Still in force when the wipe was requested (a wipe the server or an administrator
        /// ordered); false: it had ended before (an offline wipe comes only after its end).
        public var inForce: Bool

        public init(until: String, grantedAt: String, source: String, reference: String, inForce: Bool) {
            self.until = until
            self.grantedAt = grantedAt
            self.source = source
            self.reference = reference
            self.inForce = inForce
        }

        // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
        enum CodingKeys: String, CodingKey {
            case until
            case grantedAt = "granted_at"
            case source, reference
            case inForce = "in_force"
        }
    }

    public struct Method: Codable, Sendable, Equatable {
        /// NIST SP 800-88's method type where it applies ("Purge"), otherwise what was done
        /// at file level, in words that do not claim a NIST category.
        public var type: String
        /// "cryptographic erase", "file-level overwrite" or "file-level unlink".
        public var technique: String
        /// One sentence: the technique with its parameters.
        public var description: String
        public var cipher: String?
        public var keyBits: Int?
        public var passes: Int?
        public var pattern: String?
        /// What the method does not reach, in NIST's terms.
        public var note: String?

        // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
        enum CodingKeys: String, CodingKey {
            case type, technique, description, cipher
            case keyBits = "key_bits"
            case passes, pattern, note
        }
    }

    public struct Tool: Codable, Sendable, Equatable {
        public var name: String
        public var version: String
    }

    public struct Verification: Codable, Sendable, Equatable {
        /// What was checked: "vault-empty" or "key-absent" or "wrapped-key-absent".
        public var check: String
        public var passed: Bool
        public var detail: String
        public init(check: String, passed: Bool, detail: String) {
            self.check = check
            self.passed = passed
            self.detail = detail
        }
    }

    /// What became of the vault's outbox (issue 44, docs/outbox.md): sealed to the
    /// organisation and uploaded with the server's receipt, kept sealed for the next
    /// contact, destroyed with the vault, or not sealed.
    public struct Outbox: Codable, Sendable, Equatable {
        /// "uploaded" (every sealed copy received), "kept" (sealed, not all received: kept
        /// for the next contact), "destroyed" (with the vault: the offline policy's wipe),
        /// "not-sealed" (the seal failed), "empty" (nothing to seal).
        public var handling: String
        public var detail: String
        public var copies: [Copy]

        public struct Copy: Codable, Sendable, Equatable {
            public var name: String
            public var sha256: String?
            public var bytes: Int
            public var uploaded: Bool
            /// The server's receipt id (`X-Lockwipe-Receipt`), when it sent one.
            public var receipt: String?
            public var httpStatus: Int?
            /// Why it was not uploaded.
            public var problem: String?

            public init(name: String, sha256: String?, bytes: Int, uploaded: Bool, receipt: String?, httpStatus: Int?, problem: String?) {
                self.name = name
                self.sha256 = sha256
                self.bytes = bytes
                self.uploaded = uploaded
                self.receipt = receipt
                self.httpStatus = httpStatus
                self.problem = problem
            }

            enum CodingKeys: String, CodingKey {
                case name, sha256, bytes, uploaded, receipt, problem
                case httpStatus = "http_status"
            }
        }

        public init(handling: String, detail: String, copies: [Copy]) {
            self.handling = handling
            self.detail = detail
            self.copies = copies
        }

        /// The outbox's part of a wipe's certificate, decided from what was done: `seal`,
        /// the seal's words (nil: none was made), `sealFailed`; `copies`, the uploads
        /// tried; `destroyed`, what the offline policy's wipe destroyed. Nil when nothing
        /// of an outbox happened.
        public static func decide(seal: String?, sealFailed: Bool, copies: [Copy], destroyed: String?) -> Outbox? {
            if let destroyed { return Outbox(handling: "destroyed", detail: destroyed, copies: copies) }
            if sealFailed { return Outbox(handling: "not-sealed", detail: "the outbox was not sealed (\(seal ?? "")); it was wiped with the vault", copies: copies) }
            if !copies.isEmpty {
                let received = copies.filter(\.uploaded).count
                if received == copies.count {
                    return Outbox(handling: "uploaded", detail: "every sealed copy was received by the policy server before the wipe", copies: copies)
                }
                return Outbox(
                    handling: "kept",
                    detail:
                        "\(copies.count - received) of \(copies.count) sealed cop\(copies.count == 1 ? "y was" : "ies were") not received before the wipe; kept sealed in lockwiped's state directory for the next contact",
                    copies: copies)
            }
            guard let seal else { return nil }
            return Outbox(handling: "empty", detail: seal, copies: [])
        }
    }

    /// A fresh random id (UUID, lower case), made by the daemon.
    public var id: String
    /// The document whose terms the certificate uses.
    public var standard: String
    public var host: Host
    public var subject: Subject
    public var request: Request
    public var method: Method
    public var tool: Tool
    public var media: [MediaFacts]
    /// The attempt's start and end (ISO 8601, UTC).
    public var started: String
    public var finished: String
    /// "complete" or "incomplete".
    public var result: String
    /// Every entry that could not be removed (an incomplete wipe); empty when complete.
    public var exceptions: [WipeSummary.Skipped]
    public var entriesRemoved: Int
    public var filesOverwritten: Int
    public var bytesOverwritten: Int64
    public var verification: [Verification]
    public var caveats: [WipeCaveat]
    /// The outbox before the wipe; absent without `[outbox]` and in older certificates.
    public var outbox: Outbox?

    public static let standardText =
        "NIST SP 800-88 Rev. 2 (September 2025) method types (Clear, Purge, Destroy); fields after the sample certificate of sanitization in Rev. 1, Appendix G"

    /// The fscrypt policy lockwiped gives every encrypted vault (`lockwipe_fscrypt_set_policy`).
    public static let fscryptCipher = "AES-256-XTS (file contents), AES-256-CTS-CBC (file names), fscrypt policy v2"
    public static let fscryptKeyBits = 512

    /// The certificate of one finished attempt. Pure: every fact comes in as an argument
    /// (times as ISO 8601, UTC).
    public static func make(
        id: String, host: Host, subject: Subject, trigger: Trigger, reason: String, requestedAt: String, requester: WipeRequester,
        attempt: Int, summary: WipeSummary, started: String, finished: String, verification: [Verification], toolVersion: String,
        lease: Lease? = nil, recoveryKey: String? = nil, outbox: Outbox? = nil
    ) -> SanitizationCertificate {
        SanitizationCertificate(
            id: id, standard: standardText, host: host, subject: subject,
            request: Request(trigger: trigger, reason: reason, requestedAt: requestedAt, requester: requester, attempt: attempt, lease: lease),
            method: method(summary, atRest: subject.atRest, recoveryKey: recoveryKey), tool: Tool(name: "lockwiped", version: toolVersion), media: summary.media,
            started: started, finished: finished, result: summary.complete ? "complete" : "incomplete",
            exceptions: summary.skipped, entriesRemoved: summary.entriesRemoved, filesOverwritten: summary.filesOverwritten,
            bytesOverwritten: summary.bytesOverwritten, verification: verification, caveats: summary.caveats, outbox: outbox)
    }

    /// The method in NIST's words where they apply, and in plain words where they do not.
    /// `atRest`: what kept the destroyed key's stored copies, which says what a remnant of
    /// one on flash or a copy-on-write filesystem still opens with; `recoveryKey`: the
    /// organisation's recovery key the vault key was also sealed to, whose private key
    /// opens such a remnant too.
    public static func method(_ s: WipeSummary, atRest: AtRest? = nil, recoveryKey: String? = nil) -> Method {
        if s.cryptoErased {
            var note = "fscrypt encrypts file contents and names, not sizes, timestamps or the shape of the directory tree"
            switch atRest {
            case .tpm2:
                note += "; a remnant of the wrapped key that flash or a copy-on-write filesystem kept opens only with this machine's TPM2"
            case .host, .disk:
                note += "; a remnant of the wrapped key that flash or a copy-on-write filesystem kept opens with the machine key, which a copy of the disk holds (no TPM2)"
            case .passcode:
                note += "; a remnant of the wrapped key that flash or a copy-on-write filesystem kept is open to offline guessing of the passcode"
            case .some(.none), nil:
                break
            }
            if let recoveryKey {
                note += "; the vault key was also sealed to the organisation's recovery key \(recoveryKey), whose private key opens such a remnant too"
            }
            return Method(
                type: "Purge", technique: "cryptographic erase",
                description:
                    "cryptographic erase: the vault's fscrypt key was removed from the kernel and every stored copy destroyed;"
                    + " the files left were ciphertext and were unlinked",
                cipher: fscryptCipher, keyBits: fscryptKeyBits, passes: nil, pattern: nil, note: note)
        }
        let notClear =
            "NIST SP 800-88 would not call this media Clear: Clear covers all user-addressable storage of the medium, and a file-level method reaches only the blocks the files held when they were written"
        if s.passes == 0 {
            return Method(
                type: "file-level unlink (no overwrite)", technique: "file-level unlink",
                description: "the vault's entries were unlinked without overwriting their data ([wipe] passes = 0)",
                cipher: nil, keyBits: nil, passes: 0, pattern: nil,
                note: notClear + "; without an overwrite the data stays on the medium until its blocks are reused")
        }
        let passes = "\(s.passes) pass\(s.passes == 1 ? "" : "es"), \(s.pattern)"
        return Method(
            type: "file-level overwrite (\(passes))", technique: "file-level overwrite",
            description: "every regular file with one link was overwritten (\(passes)), made durable, truncated and unlinked; other entries were unlinked",
            cipher: nil, keyBits: nil, passes: s.passes, pattern: s.pattern, note: notClear)
    }

    // The wire's snake-case keys, explicit: decoding with the default key strategy is cheaper.
    enum CodingKeys: String, CodingKey {
        case id, standard, host, subject, request, method, tool, media, started, finished, result, exceptions
        case entriesRemoved = "entries_removed"
        case filesOverwritten = "files_overwritten"
        case bytesOverwritten = "bytes_overwritten"
        case verification, caveats, outbox
    }
}

extension SanitizationCertificate {
    /// The certificate for people: `lockwipectl certificate` prints these lines.
    public var textLines: [String] {
        var lines = [
            "Certificate of sanitization \(id)",
            "  standard:     \(standard)",
            "  host:         \(host.hostname)" + (host.machineID.map { " (machine \($0))" } ?? ""),
            "  user:         \(subject.user) (uid \(subject.uid)), \(subject.protection) vault",
        ]
        if let atRest = subject.atRest { lines.append("  at rest:      \(atRest.sentence) (until the wipe)") }
        lines += [
            "  directories:  \(subject.directories.joined(separator: ", "))",
            "  requested:    \(request.requestedAt), trigger \(request.trigger.rawValue): \(request.reason)",
        ]
        var by: [String] = []
        if let uid = request.requester.peerUID { by.append("peer uid \(uid)") }
        if let server = request.requester.server { by.append("server \(server)") }
        if let policy = request.requester.policy { by.append("policy: \(policy)") }
        if let limit = request.requester.retryLimit { by.append("retry limit \(limit)") }
        if !by.isEmpty { lines.append("  requester:    " + by.joined(separator: "; ")) }
        if let lease = request.lease {
            let from = lease.source == "server" ? "granted by the policy server \(lease.reference)" : "granted by an offline code, challenge \(lease.reference)"
            lines.append(
                "  lease:        offline lease until \(lease.until) (\(from), at \(lease.grantedAt)), "
                    + (lease.inForce ? "in force when the wipe was requested" : "ended before the wipe was requested"))
        }
        lines.append("  attempt:      \(request.attempt), \(started) to \(finished)")
        lines.append("  method type:  \(method.type)")
        lines.append("  method:       \(method.description)")
        if let cipher = method.cipher { lines.append("  cipher:       \(cipher)" + (method.keyBits.map { ", \($0)-bit key" } ?? "")) }
        if let note = method.note { lines.append("  note:         \(note)") }
        if let outbox {
            lines.append("  outbox:       \(outbox.handling): \(outbox.detail)")
            for c in outbox.copies {
                let what =
                    c.uploaded
                    ? "received (HTTP \(c.httpStatus.map(String.init) ?? "?")\(c.receipt.map { ", receipt \($0)" } ?? ""))"
                    : "not received: \(c.problem ?? "")"
                lines.append("                \(c.name), \(c.bytes) bytes\(c.sha256.map { ", SHA-256 \($0)" } ?? ""): \(what)")
            }
        }
        lines.append("  tool:         \(tool.name) \(tool.version)")
        for m in media {
            var text = "\(m.path): \(m.filesystem)" + (m.filesystemUUID.map { " UUID \($0)" } ?? " (UUID not readable)")
            for d in m.devices {
                var facts = [d.partition.map { "partition \($0)" }, d.model.map { "model \($0)" }, d.serial.map { "serial \($0)" }].compactMap { $0 }
                if d.model == nil { facts.append("model not readable") }
                if d.serial == nil { facts.append("serial not readable") }
                if let r = d.rotational { facts.append(r ? "rotational" : "non-rotational") }
                if let file = d.backingFile { facts.append("backed by \(file)") }
                text += "; device \(d.name) (" + facts.joined(separator: ", ") + ")"
            }
            lines.append("  media:        " + text)
        }
        if media.isEmpty { lines.append("  media:        not read") }
        lines.append(
            "  result:       \(result == "complete" ? "complete" : "INCOMPLETE"): \(TextFormat.count(entriesRemoved, "entry", "entries")) removed, \(TextFormat.count(filesOverwritten, "file", "files")) overwritten (\(TextFormat.bytes(bytesOverwritten)))"
        )
        lines += exceptions.map { "  exception:    \($0.path): \($0.reason)" }
        lines += verification.map { "  verified:     \($0.passed ? "yes" : "NO"), \($0.check): \($0.detail)" }
        lines += caveats.map { "  caveat:       \($0.kind.rawValue): \($0.path): \($0.detail)" }
        if caveats.isEmpty { lines.append("  caveats:      none detected") }
        return lines
    }
}
