import LockwipeCore
import LockwipeWipe

/// What `status` shows, gathered in the domain's values by `Manager.statusSnapshot(for:user:)`
/// (one reading of the clock, the store read once); `Control/` turns it into the wire's
/// `StatusReport` (`StatusReport+Snapshot.swift`), as homed's `-varlink.c` files turn a
/// Home into JSON.
struct StatusSnapshot: Sendable {
    /// One registration as `status` shows it.
    struct Entry: Sendable {
        var record: RegistrationRecord
        /// The policy in force for it, and where it came from ("server" or "local").
        var policy: Policy
        var policySource: String
        /// Its offline time now.
        var offline: Int64
        var next: ScheduledAction?
        /// Its warning window now (`[notify] warn_before`).
        var warning: WarningWindow.Decision
        /// When it checks in next (wall seconds), and when a pending lock on logout is due.
        var nextCheckIn: Int64?
        var logoutLockAt: Int64?
        /// The erase running now, if any.
        var runningWipe: WipeProgress?
        /// Its SAP application connection (SAP Mobile Services only).
        var connection: SAPConnectionRecord?
        /// An encrypted vault's key: how it is wrapped, the passcode's age and the failed
        /// unlocks; nil when there is none or it could not be read (said in the journal).
        var key: VaultKeyStatus?
        var passcodePolicy: PasscodePolicy
        /// What a server or offline lock waits for, when it is one.
        var lockWaitsFor: String?
        /// What a copy of the disk gets of its vault (nil once wiped).
        var atRest: AtRest?
        /// Its outbox: nil without `[outbox]` and with nothing of it kept.
        var outbox: OutboxStatus?
    }

    /// How the machine key is kept, and why it cannot be opened when it cannot.
    struct MachineKey: Sendable {
        var sealing: KeySealing?
        var problem: String?
        /// The organisation recovery key every vault key is also sealed to (its identifier).
        var recoveryKey: String?
    }

    var reading: ClockReading
    var server: ServerConfiguration
    var registrations: [Entry]
    /// The machine's policy (the newest a server sent, else the local one).
    var policy: Policy
    var policySource: String
    /// The daemon's own warnings (configuration, lock on logout, a rejected reload), and
    /// the registrations' leases refused; the registrations' warnings are added from
    /// `registrations` when the report is built.
    var missingAdminGroup: String?
    var logoutWarnings: [String]
    var rejectedReload: [String]
    /// Every registration the caller may see, for the warnings.
    var records: [RegistrationRecord]
    /// `[notify] warn_before`, for a client that plans the warnings (`PolicyPlan`).
    var warnBefore: Int64 = 0
    /// nil while the machine key is being opened (the start-up pass).
    var machineKey: MachineKey?
}
