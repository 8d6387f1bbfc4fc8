/// The kinds of audit event a registration's history records (`lockwipectl history`,
/// `GetHistory`). The raw values are what the state database stores and what `history`
/// prints: they are part of the product's contract and never change.
public enum EventKind: String, Sendable, CaseIterable {
    case blocked
    case checkInDropped = "check-in-dropped"
    case clockRollback = "clock-rollback"
    /// SAP Mobile Services: the application connection was created (or answered without an id).
    case connection
    case credentials
    case keyDestroyed = "key-destroyed"
    case keyRewrapped = "key-rewrapped"
    /// The vault key brought back with the organisation's recovery key and wrapped again.
    case keyRecovered = "key-recovered"
    /// An offline lease ended: the offline policy applies again (`OfflineLease`).
    case leaseEnded = "lease-ended"
    /// An offline lease was granted (by an offline code or the policy server).
    case leaseGranted = "lease-granted"
    /// An offline lease was asked for and refused (past `[offline_codes] max_lease_days`).
    case leaseRefused = "lease-refused"
    case lock
    case lockFailed = "lock-failed"
    case lockLifted = "lock-lifted"
    /// A contact with the policy server made its or the offline lock liftable
    /// (`[lock] lift_after_contact = "at-login"`): the user's login or passcode lifts it.
    case lockLiftable = "lock-liftable"
    case lockRecorded = "lock-recorded"
    /// An offline-code challenge was issued (docs/offline-codes.md).
    case offlineCodeChallenge = "offline-code-challenge"
    /// A helpdesk's response was accepted: what its challenge asked was done.
    case offlineCodeAccepted = "offline-code-accepted"
    /// A response was refused (wrong, for no outstanding challenge, or inside the back-off).
    case offlineCodeRefused = "offline-code-refused"
    /// The vault's outbox was sealed to the organisation before a lock, wipe or unregister.
    case outboxSealed = "outbox-sealed"
    /// The vault's outbox could not be sealed (the lock, wipe or unregister went on).
    case outboxSealFailed = "outbox-seal-failed"
    /// A sealed outbox reached the policy server (with its receipt) and was removed here.
    case outboxUploaded = "outbox-uploaded"
    /// Sealed outboxes not yet uploaded were destroyed with the vault by the offline
    /// policy's wipe (`[outbox] offline_wipe = "destroy"`).
    case outboxDestroyed = "outbox-destroyed"
    case passcodeChanged = "passcode-changed"
    case passcodeSet = "passcode-set"
    case register
    case serverPolicy = "server-policy"
    case serverPolicyRejected = "server-policy-rejected"
    case unblocked
    case unlock
    case unlockFailed = "unlock-failed"
    case unregister
    case vaultIdentity = "vault-identity"
    /// An offline lock is due within `[notify] warn_before`: the user was warned.
    case warnLock = "warn-lock"
    /// An offline wipe is due within `[notify] warn_before`: the user was warned.
    case warnWipe = "warn-wipe"
    case wipe
    case wipeIncomplete = "wipe-incomplete"
    case wipeResumed = "wipe-resumed"
    case wipeStarted = "wipe-started"
}
