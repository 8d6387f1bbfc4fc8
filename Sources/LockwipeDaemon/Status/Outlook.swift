import LockwipeCore

/// One registration evaluated as of a clock reading: its offline time and the next
/// action its policy schedules. Computed once per registration and pass, and shared
/// by what that pass reports (STATUS=, the wake-up, warnings, `status`).
struct Outlook {
    var record: RegistrationRecord
    var offline: Int64
    var next: ScheduledAction?
}
