import LockwipeCore
import Logging

/// SAP settings without `blockWipingPolicy` (`ServerPolicyAbsence`): said in the journal
/// once, when the section goes missing; `status` says it for as long as it is missing.
extension Registration {
    /// Journals that `outcome`, a contact for `before`'s registration, has no policy
    /// section while the settings stored before had one (or there were none).
    func notePolicyAbsence(_ outcome: CheckInOutcome, before: RegistrationRecord) {
        guard case .contact(let settings) = outcome,
            ServerPolicyAbsence.shouldJournal(protocol: context.configuration.server.serverProtocol, before: before.server.settings, new: settings)
        else { return }
        context.logger.warning(
            "\(before.user): \(ServerPolicyAbsence.note)",
            metadata: [
                "user": .string(before.user), "action": "check-in", "registration_id": .string(before.id.rawValue),
                "message_id": MessageID.serverPolicyAbsent.metadata,
            ])
    }
}
