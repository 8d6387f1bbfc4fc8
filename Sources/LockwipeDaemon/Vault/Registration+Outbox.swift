import Crypto
import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeVaultIO
import Logging

/// The outbox of one registration (`[outbox]`, docs/outbox.md): what its applications had
/// not yet uploaded, sealed to the organisation before a lock, wipe or unregister takes
/// the vault out of their hands (when, `OutboxSealing` in Core), kept in lockwiped's state
/// directory (`SealedOutboxes`).
extension Registration {
    /// How long a seal may take: it reads at most `[outbox] max_bytes` from the vault.
    static let outboxSealTimeout: Duration = .seconds(60)

    /// Seals `r`'s outbox before `moment` when the configuration and `OutboxSealing` say
    /// so. The caller seals only a vault that was open (`active`): a locked vault's outbox
    /// was sealed at its lock, and an encrypted one cannot be read. Never
    /// stops what it comes before: a seal that fails is said in history and the journal
    /// (MESSAGE_ID `outboxSealFailed`) and the lock, wipe or unregister goes on. Returns
    /// what it came to; nil when nothing was to be sealed.
    nonisolated(nonsending) func sealOutbox(_ r: RegistrationRecord, before moment: OutboxSealing.Moment, trigger: Trigger) async -> SealedOutboxes.SealOutcome? {
        let configuration = context.configuration
        guard let relative = r.outbox ?? configuration.outbox.directory, let recipient = configuration.outboxRecipient,
            OutboxSealing.seals(before: moment, trigger: trigger, offlineWipe: configuration.outbox.offlineWipe)
        else { return nil }
        let now = context.clock.now().wall
        let header = OutboxHeader(recipient: recipient.identifier, registration: r.id, user: r.user, sealedAt: now, reason: "\(moment.rawValue), \(trigger.rawValue)")
        let store = SealedOutboxes(stateDirectory: context.paths.stateDirectory)
        let limits = OutboxReader.Limits(maxBytes: configuration.outbox.maxBytes, maxFiles: configuration.outbox.maxFiles)
        let (vaults, uid) = (r.vaults, r.uid)
        var meta: Logger.Metadata = [
            "user": .string(r.user), "uid": "\(r.uid)", "registration_id": .string(r.id.rawValue), "action": .string(moment.rawValue),
            "trigger": .string(trigger.rawValue), "outbox_recipient": .string(recipient.identifier),
        ]
        let sealed: SealedOutboxes.Sealed
        do {
            sealed = try await context.vaultCalls.run(for: vaultOwner, "sealing the outbox", timeout: Self.outboxSealTimeout) {
                try store.seal(vaults: vaults, relative: relative, uid: uid, limits: limits, to: recipient, header: header)
            }
        } catch {
            let words = ErrorWords.of(error)
            let outcome = "not sealed: \(words)"
            meta["message_id"] = MessageID.outboxSealFailed.metadata
            meta["error"] = .string(words)
            context.logger.error("the outbox of \(r.user) could not be sealed before the \(moment.rawValue); it goes on: \(words)", metadata: meta)
            await context.recordOutbox(r, .outboxSealFailed, trigger, "outbox \(outcome) (before the \(moment.rawValue))", at: now)
            return SealedOutboxes.SealOutcome(words: outcome, sealed: nil, failed: true)
        }
        let s = sealed.summary
        var outcome: String
        if let name = sealed.name {
            outcome = "sealed \(s.files) file(s), \(s.bytes) bytes, to \(recipient.identifier) as \(name)"
        } else {
            outcome = "empty, nothing sealed"
        }
        if s.leftOut > 0 { outcome += "; \(s.leftOut) file(s) left in the vault (past [outbox] max_files or max_bytes)" }
        if s.skippedCount > 0 { outcome += "; \(s.skippedCount) entr(ies) skipped: " + s.skipped.prefix(3).joined(separator: "; ") }
        guard sealed.name != nil || s.leftOut > 0 || s.skippedCount > 0 else {
            context.logger.debug("the outbox of \(r.user) is empty: nothing sealed before the \(moment.rawValue)", metadata: meta)
            return SealedOutboxes.SealOutcome(words: outcome, sealed: nil)
        }
        meta["message_id"] = MessageID.outboxSealed.metadata
        meta["outbox_files"] = "\(s.files)"
        meta["outbox_bytes"] = "\(s.bytes)"
        meta["outbox_left_out"] = "\(s.leftOut)"
        meta["outbox_skipped"] = "\(s.skippedCount)"
        if let name = sealed.name {
            meta["outbox_name"] = .string(name)
            meta["outbox_sha256"] = .string(sealed.sha256)
        }
        context.logger.notice("the outbox of \(r.user) before the \(moment.rawValue): \(outcome)", metadata: meta)
        await context.recordOutbox(r, .outboxSealed, trigger, "outbox \(outcome) (before the \(moment.rawValue))", at: now)
        return SealedOutboxes.SealOutcome(words: outcome, sealed: sealed.name == nil ? nil : sealed)
    }

    /// The outbox's part of a wipe (`performWipe`), after willWipe and before the wipe's
    /// lock: sealed when `sealing` (the vault was open and `OutboxSealing` says so), then
    /// uploaded within `[outbox] upload_wait_seconds` when the wipe waits for it, or
    /// destroyed with the vault by the offline policy's wipe (`offline_wipe = "destroy"`),
    /// or uploaded beside the wipe. Returns the hooks' words and the certificate's part.
    nonisolated(nonsending) func outboxBeforeWipe(
        _ r: RegistrationRecord, trigger: Trigger, sealing: Bool
    ) async -> (words: String?, certificate: SanitizationCertificate.Outbox?) {
        let configuration = context.configuration.outbox
        let seal = sealing ? await sealOutbox(r, before: .wipe, trigger: trigger) : nil
        var copies: [SanitizationCertificate.Outbox.Copy] = []
        var destroyed: String?
        if OutboxSealing.waitsForUpload(before: .wipe, trigger: trigger) {
            copies = await context.uploadOutboxes(r, within: configuration.uploadWaitSeconds).map { u in
                switch u.answer {
                case .received(let status, let receipt):
                    .init(name: u.name, sha256: u.sha256.isEmpty ? nil : u.sha256, bytes: u.bytes, uploaded: true, receipt: receipt, httpStatus: status, problem: nil)
                case .notUploaded(let why):
                    .init(name: u.name, sha256: u.sha256.isEmpty ? nil : u.sha256, bytes: u.bytes, uploaded: false, receipt: nil, httpStatus: nil, problem: why)
                }
            }
        } else if OutboxSealing.destroysKept(before: .wipe, trigger: trigger, offlineWipe: configuration.offlineWipe) {
            destroyed = await context.destroyKeptOutboxes(r, trigger: trigger)
            if destroyed == nil, (r.outbox ?? configuration.directory) != nil {
                destroyed = "the outbox was wiped with the vault, unsealed ([outbox] offline_wipe = \"destroy\")"
            }
        } else if seal?.sealed != nil {
            startOutboxUploads(r, sealed: true)
        }
        var words = seal?.words
        if !copies.isEmpty {
            let received = copies.filter(\.uploaded).count
            words = (words.map { $0 + "; " } ?? "") + "\(received) of \(copies.count) sealed outbox(es) received by the server"
        }
        if let destroyed { words = (words.map { $0 + "; " } ?? "") + destroyed }
        let certificate = SanitizationCertificate.Outbox.decide(seal: seal?.words, sealFailed: seal?.failed ?? false, copies: copies, destroyed: destroyed)
        return (words, certificate)
    }

    /// Starts the upload of the sealed outboxes kept on the machine beside whatever comes
    /// next (a lock, a contact): nothing waits for it (`RegistrationContext.sweepOutboxes`).
    /// `sealed`: `r` has just sealed one, which goes at once even after a failure.
    func startOutboxUploads(_ r: RegistrationRecord, sealed: Bool = false) {
        guard context.fetcher != nil, context.configuration.server.url != nil else { return }
        let (context, id) = (context, r.id)
        context.timerEvents.post { await context.sweepOutboxes(sealed: sealed ? id : nil) }
    }

    /// The outbox directory in each of `r`'s vaults (the hooks' `LOCKWIPE_OUTBOX`); empty
    /// when no outbox is configured.
    func outboxDirectories(_ r: RegistrationRecord) -> [String] {
        guard let relative = r.outbox ?? context.configuration.outbox.directory else { return [] }
        return r.directories.map { $0 + "/" + relative }
    }

}
