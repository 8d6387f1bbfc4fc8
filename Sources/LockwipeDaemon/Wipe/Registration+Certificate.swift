import Foundation
import LockwipeCheckIn
import LockwipeCore
import LockwipeWipe

/// Sanitization certificates: one for every wipe attempt, complete or not, built from the
/// attempt's report and stored with its result (`StateStore.finishWipe`). Shown by
/// `lockwipectl certificate` and in `history --json`.
extension Registration {
    /// What a finished attempt certifies, with the checks made after it.
    struct Attempt {
        var record: RegistrationRecord
        var pending: StateStore.PendingWipe?
        var trigger: Trigger
        var reason: String
        var started: Int64
        /// Whether the vault key was verifiably removed from the kernel (encrypted vaults).
        var keyRemovedFromKernel: Bool?
        /// Its protection at rest until the wipe, read before the key was destroyed.
        var atRest: AtRest?
        /// The organisation's recovery key its vault key was also sealed to, if any.
        var recoveryKey: String?
        /// What became of the vault's outbox before the wipe.
        var outbox: SanitizationCertificate.Outbox?
    }

    /// The certificate of `attempt`, after verifying its result: the vaults are re-walked,
    /// and for an encrypted vault the key is checked gone from the context.store.
    nonisolated(nonsending) func certificate(_ attempt: Attempt, summary: WipeSummary) async -> SanitizationCertificate {
        let r = attempt.record
        let (vaults, removeRoot) = (r.vaults, context.configuration.wipe.removeRoot)
        var verification: [SanitizationCertificate.Verification] = []
        if r.protection == .encrypted {
            let removed = attempt.keyRemovedFromKernel ?? false
            verification.append(
                .init(
                    check: "key-absent", passed: removed,
                    detail: removed
                        ? "the vault key is absent from the kernel for all users (fscrypt key status, checked before the files were removed)"
                        : "the vault key was not verifiably removed from the kernel (files held open by processes that were not ended); the files were overwritten instead"
                ))
            // A check that could not be made does not pass.
            var absent = false
            let detail: String
            do {
                absent = try await context.store.vaultKeyStatus(registration: r.id) == nil
                detail = absent ? "no wrapped copy of the vault key is left in the state directory" : "a wrapped copy of the vault key is still stored"
            } catch {
                context.stateNotice("the wipe certificate of \(r.user) cannot show the wrapped key absent", user: r.user, error)
                detail = "whether a wrapped copy of the vault key is left could not be read from the state database"
            }
            verification.append(.init(check: "wrapped-key-absent", passed: absent, detail: detail))
        }
        do {
            verification.append(try await context.vaultCalls.run(for: vaultOwner, "the certificate's re-walk") { WipeVerification.remaining(vaults, removeRoot: removeRoot) })
        } catch {
            verification.append(.init(check: "vault-empty", passed: false, detail: "the re-walk could not run: \(error)"))
        }
        let finished = context.clock.now().wall
        let hostname = Self.hostname()
        return SanitizationCertificate.make(
            id: UUID().uuidString.lowercased(),
            host: .init(hostname: hostname, machineID: try? DeviceID.fromMachineID(file: ConfigurationLoader.machineIDPath)),
            subject: .init(user: r.user, uid: r.uid, directories: r.directories, protection: r.protection.rawValue, atRest: attempt.atRest),
            trigger: attempt.trigger, reason: attempt.reason, requestedAt: Timestamp.iso(attempt.pending?.startedAt ?? attempt.started),
            requester: attempt.pending?.requester ?? WipeRequester(), attempt: attempt.pending?.attempts ?? 1, summary: summary,
            started: Timestamp.iso(attempt.started), finished: Timestamp.iso(finished), verification: verification,
            toolVersion: LockwipeVersion.current, lease: context.certificateLease(r, requestedAt: attempt.pending?.startedAt ?? attempt.started),
            recoveryKey: attempt.recoveryKey, outbox: attempt.outbox)
    }

    static func hostname() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "unknown" }
        return String(cString: buffer)
    }
}
