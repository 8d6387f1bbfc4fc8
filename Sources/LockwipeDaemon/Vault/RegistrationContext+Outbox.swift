import Crypto
import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeVaultIO
import Logging

/// The sealed outboxes a registration left in lockwiped's state directory
/// (`SealedOutboxes`): uploaded to the policy server with its own credentials, or
/// destroyed with its vault. On the context, not the `Registration`: an upload runs beside
/// a lock or after a contact, outside the registration's turn (`Registration+Outbox.swift`
/// seals and decides when).
extension RegistrationContext {
    /// Uploads every sealed outbox kept on the machine, each with the credentials of the
    /// registration it belongs to: run after a contact (the server is reachable, whoever
    /// is logged in) and after a seal. A wiped registration, which checks in no more, sends
    /// its own this way; one unregistered since has no credentials left, and its outboxes
    /// stay for an operator to collect (docs/outbox.md). One at a time per registration,
    /// and after a failure not again before the next check-in interval but for `sealed`,
    /// the registration that has just sealed one (`OutboxUploads`). Nothing with SAP
    /// Mobile Services, which has no endpoint for it: the outboxes are kept.
    nonisolated(nonsending) func sweepOutboxes(sealed: RegistrationID? = nil) async {
        guard configuration.server.serverProtocol == .lockwipe else { return }
        let outboxes = SealedOutboxes(stateDirectory: paths.stateDirectory)
        let seconds = max(configuration.outbox.uploadWaitSeconds, configuration.server.timeoutSeconds)
        let byRegistration: [RegistrationID: [SealedOutboxes.Kept]]
        do {
            byRegistration = Dictionary(grouping: try await BlockingPool.run { try outboxes.all() }, by: \.registration)
        } catch {
            logger.warning(
                "the sealed outboxes kept on the machine cannot be listed, none is uploaded now: \(ErrorWords.of(error))",
                metadata: ["message_id": MessageID.outboxUploadFailed.metadata, "error": .string(ErrorWords.of(error))])
            return
        }
        let retry = Duration.seconds(configuration.server.intervalSeconds)
        for (id, listed) in byRegistration.sorted(by: { $0.key < $1.key }) where outboxUploads.begin(id, retryAfter: retry, force: id == sealed) {
            var failed = true
            defer { outboxUploads.end(id, failed: failed) }
            let record: RegistrationRecord?
            do {
                record = try await store.registration(id: id)
            } catch {
                stateNotice("the sealed outboxes of registration \(id) are not uploaded now", error)
                continue
            }
            guard let record else {  // unregistered: kept for an operator
                failed = false
                continue
            }
            let uploads = await uploadOutboxes(record, within: seconds, listed: listed)
            failed = uploads.contains { if case .received = $0.answer { false } else { true } }
        }
    }

    /// Uploads the sealed outboxes kept for `r`, oldest first, to the policy server with
    /// `r`'s own credentials (whoever is logged in now), within `seconds` in all; each one
    /// received is removed here and said in history (`outbox-uploaded`, with the server's
    /// receipt) and the journal (MESSAGE_ID `outboxUploaded`); one that is not stays for
    /// the next contact (MESSAGE_ID `outboxUploadFailed`). Returns what became of each.
    /// Nothing without a policy server. Runs with or without `r`'s turn: a name sent twice
    /// is the same file, which the server stores once.
    /// `listed`: its sealed outboxes as the caller has just listed them (the sweep), so that
    /// the directory is not read again.
    nonisolated(nonsending) func uploadOutboxes(_ r: RegistrationRecord, within seconds: Int, listed: [SealedOutboxes.Kept]? = nil) async -> [SealedOutboxes.Upload] {
        let server = configuration.server
        guard let fetcher = fetcher, server.url != nil else { return [] }
        let outboxes = SealedOutboxes(stateDirectory: paths.stateDirectory)
        let id = r.id
        let meta: Logger.Metadata = ["user": .string(r.user), "uid": "\(r.uid)", "registration_id": .string(id.rawValue)]
        let kept: [SealedOutboxes.Kept]
        let credentials: ServerCredentials?
        do {
            if let listed { kept = listed } else { kept = try await BlockingPool.run { try outboxes.kept(for: id) } }
            guard !kept.isEmpty else { return [] }
            credentials = try await store.credentials(registration: id)
        } catch {
            var m = meta
            m["message_id"] = MessageID.outboxUploadFailed.metadata
            m["error"] = .string(ErrorWords.of(error))
            logger.warning("the sealed outboxes of \(r.user) cannot be uploaded now: \(ErrorWords.of(error))", metadata: m)
            return []
        }
        let end = ContinuousClock.now + .seconds(seconds)
        var results: [SealedOutboxes.Upload] = []
        for k in kept {
            let left = Int((end - .now).components.seconds)
            var upload = SealedOutboxes.Upload(name: k.name, sha256: "", bytes: k.bytes, answer: .notUploaded("the wait of \(seconds) s for the upload ran out"))
            if left > 0 {
                do {
                    let bytes = try await BlockingPool.run { try outboxes.read(k.name) }
                    upload.sha256 = SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
                    upload.answer = await fetcher.uploadOutbox(user: r.user, name: k.name, body: bytes, credentials: credentials, server: server, timeoutSeconds: left)
                } catch {
                    upload.answer = .notUploaded("it cannot be read: \(ErrorWords.of(error))")
                }
            }
            await settle(r, upload, outboxes: outboxes, meta: meta)
            results.append(upload)
        }
        return results
    }

    /// One upload's end: a received outbox removed here and recorded; one not received said.
    private nonisolated(nonsending) func settle(_ r: RegistrationRecord, _ upload: SealedOutboxes.Upload, outboxes: SealedOutboxes, meta: Logger.Metadata) async {
        var m = meta
        m["outbox_name"] = .string(upload.name)
        m["outbox_bytes"] = "\(upload.bytes)"
        switch upload.answer {
        case .received(let status, let receipt):
            let name = upload.name
            var detail = "sealed outbox \(name) (\(upload.bytes) bytes, SHA-256 \(upload.sha256)) received by the server (HTTP \(status)"
            detail += receipt.map { ", receipt \($0))" } ?? ", no receipt id)"
            do {
                try await BlockingPool.run { try outboxes.remove(name) }
            } catch {
                detail += "; its copy here could not be removed: \(ErrorWords.of(error))"
            }
            m["message_id"] = MessageID.outboxUploaded.metadata
            m["outbox_sha256"] = .string(upload.sha256)
            m["outbox_receipt"] = .string(receipt ?? "")
            m["http_status"] = "\(status)"
            logger.notice("\(r.user): \(detail)", metadata: m)
            await recordOutbox(r, .outboxUploaded, nil, detail, at: clock.now().wall)
        case .notUploaded(let why):
            m["message_id"] = MessageID.outboxUploadFailed.metadata
            m["error"] = .string(why)
            logger.warning("the sealed outbox \(upload.name) of \(r.user) was not uploaded, it is kept for the next contact: \(why)", metadata: m)
        }
    }

    /// Destroys the sealed outboxes kept for `r` (the offline policy's wipe with
    /// `[outbox] offline_wipe = "destroy"`, SAP's behaviour); returns what it says of them.
    nonisolated(nonsending) func destroyKeptOutboxes(_ r: RegistrationRecord, trigger: Trigger) async -> String? {
        let outboxes = SealedOutboxes(stateDirectory: paths.stateDirectory)
        let id = r.id
        do {
            let names = try await BlockingPool.run {
                let kept = try outboxes.kept(for: id)
                for k in kept { try outboxes.remove(k.name) }
                return kept.map(\.name)
            }
            guard !names.isEmpty else { return nil }
            let detail = "destroyed \(names.count) sealed outbox(es) not yet uploaded, with the vault ([outbox] offline_wipe = \"destroy\"): \(names.joined(separator: ", "))"
            logger.notice(
                "\(r.user): \(detail)",
                metadata: ["user": .string(r.user), "registration_id": .string(id.rawValue), "message_id": MessageID.outboxDestroyed.metadata])
            await recordOutbox(r, .outboxDestroyed, trigger, detail, at: clock.now().wall)
            return detail
        } catch {
            let detail = "the sealed outboxes not yet uploaded could not all be destroyed: \(ErrorWords.of(error))"
            logger.error(
                "\(r.user): \(detail)",
                metadata: ["user": .string(r.user), "registration_id": .string(id.rawValue), "message_id": MessageID.outboxSealFailed.metadata])
            return detail
        }
    }

    nonisolated(nonsending) func recordOutbox(_ r: RegistrationRecord, _ kind: EventKind, _ trigger: Trigger?, _ detail: String, at now: Int64) async {
        do {
            try await store.append(event(r.user, kind, trigger, detail, at: now))
        } catch {
            stateNotice("the outbox's \(kind.rawValue) is not in the history of \(r.user)", user: r.user, error)
        }
    }
}
