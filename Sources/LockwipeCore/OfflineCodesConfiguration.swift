/// `[offline_codes]` of lockwiped.toml: the offline leases a helpdesk's code or the policy
/// server may grant (see `OfflineLease`).
public struct OfflineCodesConfiguration: Sendable, Equatable {
    /// Days of offline lease that come with a lock an offline code lifted, so that the
    /// machine does not lock again at once (`unlock_lease_days`).
    public var unlockLeaseDays = 1
    /// The longest lease anyone may grant, in days from the moment it is granted
    /// (`max_lease_days`): an offline code's extension or the policy server's `offlineLease`.
    public var maxLeaseDays = 30

    public init() {}

    /// Every reason these settings cannot be used, as (key, message); empty when valid.
    public var problems: [(key: String, message: String)] {
        var found: [(key: String, message: String)] = []
        if unlockLeaseDays > maxLeaseDays {
            found.append(
                (
                    "unlock_lease_days",
                    "must not be more than max_lease_days (\(maxLeaseDays)), not \(unlockLeaseDays): a lifted lock would come with a lease longer than any lease may be"
                ))
        }
        return found
    }
}
