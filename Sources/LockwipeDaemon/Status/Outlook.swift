import LockwipeCore

/// One registration evaluated as of a clock reading: its offline time and the next
/// action its policy schedules. Computed once per registration and pass, and shared
/// by what that pass reports (STATUS=, the wake-up, warnings, `status`).
struct Outlook {
    var record: RegistrationRecord
    var offline: Int64
    var next: ScheduledAction?
}

extension Outlook {
    /// The warning window's decision (`[notify] warn_before` is `warnBefore` seconds).
    func warning(warnBefore: Int) -> WarningWindow.Decision {
        WarningWindow.decide(next: next, lastContact: record.clock.lastContact, offlineSeconds: offline, warnBefore: Int64(warnBefore))
    }

    /// Its entry in systemd's STATUS= line.
    func summaryEntry(warnBefore: Int) -> StatusSummary.Entry {
        let warned = if case .warn = warning(warnBefore: warnBefore) { true } else { false }
        return StatusSummary.Entry(user: record.user, state: record.state, next: next, warned: warned)
    }
}
