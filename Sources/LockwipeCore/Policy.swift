/// The offline policy: how many days without a successful server contact before a
/// registration's vault is locked, and before it is wiped. Zero means "never".
///
/// Invariant of a *valid* policy: both values are non-negative, and when both are set the
/// wipe comes strictly after the lock. An invalid policy is never "fixed" silently: callers
/// reject it and keep the last valid one.
public struct Policy: Sendable, Equatable, Codable {
    public var offlineDaysBeforeLock: Int
    public var offlineDaysBeforeWipe: Int

    /// The default (lockwiped.toml(5), `[policy]`): never lock, never wipe.
    public static let never = Policy(offlineDaysBeforeLock: 0, offlineDaysBeforeWipe: 0)

    public init(offlineDaysBeforeLock: Int, offlineDaysBeforeWipe: Int) {
        self.offlineDaysBeforeLock = offlineDaysBeforeLock
        self.offlineDaysBeforeWipe = offlineDaysBeforeWipe
    }

    /// Every reason this policy cannot be enforced, as (key, message); empty when valid.
    public var problems: [(key: String, message: String)] {
        var found: [(key: String, message: String)] = []
        if offlineDaysBeforeLock < 0 {
            found.append(("offline_days_before_lock", "must be 0 (never) or a positive number of days, not \(offlineDaysBeforeLock)"))
        }
        if offlineDaysBeforeWipe < 0 {
            found.append(("offline_days_before_wipe", "must be 0 (never) or a positive number of days, not \(offlineDaysBeforeWipe)"))
        }
        if offlineDaysBeforeLock > 0, offlineDaysBeforeWipe > 0, offlineDaysBeforeWipe <= offlineDaysBeforeLock {
            found.append(
                (
                    "offline_days_before_wipe",
                    "must be greater than offline_days_before_lock (\(offlineDaysBeforeLock)) when both are set, not \(offlineDaysBeforeWipe); set it to 0 for lock only"
                ))
        }
        return found
    }

    public var isValid: Bool { problems.isEmpty }

    /// Seconds of offline time after which the vault locks, or nil for never.
    public var lockAfterSeconds: Int64? { Self.seconds(days: offlineDaysBeforeLock) }
    /// Seconds of offline time after which the vault is wiped, or nil for never.
    public var wipeAfterSeconds: Int64? { Self.seconds(days: offlineDaysBeforeWipe) }

    private static func seconds(days: Int) -> Int64? {
        days > 0 ? Int64(days) * 86_400 : nil
    }
}

/// What the daemon does to a vault.
public enum Action: String, Sendable, Codable, Equatable {
    case lock
    case wipe
}

/// Why an action happened: recorded in history and the journal (`LOCKWIPE_TRIGGER`).
public enum Trigger: String, Sendable, Codable, Equatable {
    /// The offline threshold of the policy was crossed.
    case offline
    /// An administrator asked for it over the control socket.
    case admin
    /// The registered user asked for it themselves.
    case user
    /// The policy server asked for it.
    case server
    /// The daemon resumed an action interrupted by a crash or reboot.
    case resume
    /// The user's last login session ended `lock_timeout` seconds ago.
    case logout
    /// Failed passcode attempts reached the passcode policy's `retry_limit`.
    case retryLimit = "retry-limit"
}
