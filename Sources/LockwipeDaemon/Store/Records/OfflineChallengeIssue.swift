/// What asking for a challenge came to (`StateStore.issueOfflineChallenge`).
public enum OfflineChallengeIssue: Equatable, Sendable {
    case issued(counter: UInt32)
    /// The counters of key epoch `epoch` are used up: provision the next epoch.
    case usedUp(epoch: Int)
    /// The registration asked `OfflineChallengeRate.perWindow` already: again from `until`.
    case tooSoon(until: Int64)
    /// Provisioned meanwhile: the counters are of epoch `now`.
    case epochChanged(now: Int)
}
