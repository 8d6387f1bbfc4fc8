/// The one-line `STATUS=` text systemd shows in `systemctl status`:
/// "3 users, 1 locked; next: lock alice in 2d 4h".
public enum StatusSummary {
    public struct Entry: Sendable {
        public var user: String
        public var state: RegistrationState
        public var next: ScheduledAction?
        /// Within `[notify] warn_before` of an offline lock or wipe.
        public var warned: Bool
        public init(user: String, state: RegistrationState, next: ScheduledAction?, warned: Bool = false) {
            self.user = user
            self.state = state
            self.next = next
            self.warned = warned
        }
    }

    public static func line(_ entries: [Entry]) -> String {
        let users = entries.filter { $0.state != .wiped }.count
        var text = "\(users) user\(users == 1 ? "" : "s")"
        let locked = entries.filter { $0.state == .locked }.count
        if locked > 0 { text += ", \(locked) locked" }
        let lockFailed = entries.filter { $0.state == .lockFailed }.count
        if lockFailed > 0 { text += ", \(lockFailed) LOCK FAILED" }
        let wiping = entries.filter { $0.state == .wipePending || $0.state == .wiping }.count
        if wiping > 0 { text += ", \(wiping) wiping" }
        let warned = entries.filter(\.warned).count
        if warned > 0 { text += ", \(warned) warned" }
        let soonest = entries.compactMap { e in e.next.map { (e.user, $0) } }.min { $0.1.inSeconds < $1.1.inSeconds }
        if let (user, next) = soonest {
            text += "; next: \(next.action.rawValue) \(user) in \(RelativeTime.format(seconds: next.inSeconds))"
        } else {
            text += "; nothing due"
        }
        return text
    }
}
