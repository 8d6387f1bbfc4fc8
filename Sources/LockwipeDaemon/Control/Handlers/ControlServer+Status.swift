import LockwipeCore
import LockwipeProtocol

/// `GetStatus`, `GetHistory`, `GetCertificate` (`GetPolicy` is bound directly).
extension ControlServer {
    /// Who sees which registrations is the Manager's filter (`Ownership.isOwn`): everyone
    /// may ask. During the start-up pass the report says so.
    func getStatus(_ p: StatusRequest, caller: Caller) async throws -> StatusReport {
        var report = StatusReport(try await manager.statusSnapshot(for: caller, user: p.user))
        if p.loginGate != true { report.offlineCodes = OfflineCodesInfo(await manager.context.offlineCodesStatus()) }
        if isStartingUp {
            report.startingUp = true
            report.warnings.insert(
                "lockwiped is finishing its start-up pass: what it shows may still change, and every request but status is refused until it has ended",
                at: 0)
        }
        return report
    }

    func getHistory(_ p: HistoryRequest, caller: Caller) async throws -> HistoryReply {
        // For a user naming nobody, the registration her own name has.
        let targets = try await authorize(.readHistory, caller, user: p.user, namedRegistration: p.user ?? caller.userName)
        guard case .records(let user, let owner) = targets else { return HistoryReply(events: []) }
        return HistoryReply(try await manager.historyPage(user: user, owner: owner, limit: p.limit ?? 1000, since: p.since))
    }

    func getCertificate(_ p: CertificateRequest, caller: Caller) async throws -> CertificateReply {
        guard case .records(_, let owner) = try await authorize(.readCertificate, caller, user: p.user) else { preconditionFailure("the certificate rule allows records") }
        return CertificateReply(certificate: try await manager.certificate(user: p.user, id: p.id, owner: owner))
    }
}
