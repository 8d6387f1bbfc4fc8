import Foundation
import LockwipeCore
import Logging

/// A registration the policy server rejects (reached, but refusing the machine:
/// `CheckInOutcome.rejected`): the journal says it at every such check-in
/// (`registrationRejected`), `status` and the metrics while it lasts, and the observers
/// (the `warnRejected` hook) once, when it starts.
extension Manager {
    /// Tells the observers, in the background (hooks never hold up a check-in), that the
    /// server started rejecting `r`: what it answered and what to check, and what the
    /// offline clock, which runs on, does next and when.
    func announceRejection(_ r: RegistrationRecord, status: Int, text: String, reading: ClockReading) {
        let next = outlook(r, reading).next
        var reason = "the policy server rejects the check-ins (HTTP \(status): \(text)); \(CheckInDecision.rejectionAdvice)"
        if let next {
            reason += "; until a check-in succeeds the offline clock runs on: \(next.action.rawValue) in \(RelativeTime.format(seconds: next.inSeconds))"
        }
        let event = LockWipeEvent(
            user: r.user, uid: r.uid, action: next?.action ?? .lock, reason: reason, trigger: .server, directories: r.directories,
            dueAt: next.map { reading.wall + $0.inSeconds })
        let observers = self.observers
        let number = nextNotification
        nextNotification += 1
        backgroundNotifications[number] = Task {
            await observers.notify(.warnRejected, event)
            await self.notificationFinished(number)
        }
    }
}
