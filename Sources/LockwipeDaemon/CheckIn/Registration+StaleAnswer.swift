import LockwipeCheckIn
import LockwipeCore
import Logging

/// A check-in answer that arrived after its registration was unregistered.
extension Registration {
    /// An answer (or a request cancelled by unregister) for this registration, which is gone:
    /// applied to nobody, logged and recorded in the history of the user name.
    nonisolated(nonsending) func dropStale(_ outcome: CheckInOutcome, purpose: Manager.CheckInPurpose) async -> Outcome {
        let asked = id
        let current: RegistrationID?
        do {
            current = try await context.store.registration(user)?.id
        } catch {
            context.stateNotice("the dropped check-in of \(user) does not say whether the name was registered again", user: user, error)
            current = nil
        }
        let answer: String
        switch outcome {
        case .contact: answer = "a contact (settings)"
        case .lock: answer = "HTTP 403 TRAFFIC_REG_LOCKED"
        case .wipe: answer = "HTTP 403 TRAFFIC_REG_WIPED"
        case .blocked(let code): answer = "HTTP 403 \(code)"
        case .rejected(let status, let text): answer = "rejected (HTTP \(status): \(text))"
        case .failure(let why): answer = "no answer (\(why))"
        }
        let since = current.map { "was unregistered and \(user) registered again (registration \($0))" } ?? "was unregistered"
        let detail = "check-in of registration \(asked) dropped: \(answer); the registration \(since) before the answer could be applied"
        do {
            try await context.store.append(context.event(user, .checkInDropped, .server, detail, at: context.clock.now().wall))
        } catch {
            context.stateNotice("the dropped check-in is not in the history of \(user)", user: user, error)
        }
        context.logger.warning(
            "\(detail)",
            metadata: [
                "message_id": MessageID.checkInDropped.metadata, "user": .string(user), "action": "check-in",
                "purpose": .string(purpose.rawValue), "registration_id": .string(asked.rawValue), "result": "dropped",
            ])
        return Outcome(user: user, operation: .checkIn, state: nil, reason: detail, failed: true)
    }
}
