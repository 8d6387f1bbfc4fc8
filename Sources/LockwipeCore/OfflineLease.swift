/// An offline lease: "this registration may stay offline until DATE". Until then the
/// offline policy neither locks nor wipes it (`PolicyEvaluator.evaluate(leaseEndsAt:)`);
/// the offline time still counts from the last contact.
///
/// Granted by a helpdesk's offline code (issue 30: a lifted lock comes with
/// `[offline_codes] unlock_lease_days`, an extension with the days asked for) or by the
/// policy server in its settings answer (the lockwipe protocol's `offlineLease`), never
/// further than `[offline_codes] max_lease_days` from the moment it is granted.
///
/// Its end is read on the offline clock, not on the wall clock alone: the lease is in force
/// while `lastContact + offlineSeconds < until`, and the offline time never shrinks when the
/// wall clock is set back (`OfflineClock`), so setting the clock back does not make a lease
/// last longer.
public struct OfflineLease: Sendable, Equatable, Codable {
    /// Who granted it.
    public enum Source: String, Sendable, Equatable, Codable, CaseIterable {
        /// A helpdesk's response to this machine's challenge (`lockwipectl offline-code enter`).
        case offlineCode = "offline-code"
        /// The policy server's settings answer (lockwipe protocol, `offlineLease`).
        case server
    }

    /// The end of the lease: wall-clock seconds since the Unix epoch.
    public var until: Int64
    /// When it was granted (wall clock).
    public var grantedAt: Int64
    public var source: Source
    /// What it answered: the challenge (offline code) or the server's URL (server).
    public var reference: String
    /// When its end was recorded (the `lease-ended` event); nil while it is in force, and
    /// for a lease that a contact made moot before it ended.
    public var endedAt: Int64?

    public init(until: Int64, grantedAt: Int64, source: Source, reference: String, endedAt: Int64? = nil) {
        self.until = until
        self.grantedAt = grantedAt
        self.source = source
        self.reference = reference
        self.endedAt = endedAt
    }

    /// The offline time (seconds, counted from `clock.lastContact`) at which the lease
    /// ends: what `PolicyEvaluator.evaluate(leaseEndsAt:)` takes. Zero or less: it ended
    /// before the last contact, and holds nothing off.
    public func endsAtOffline(_ clock: OfflineClock) -> Int64 {
        until - clock.lastContact
    }

    /// In force at the offline clock's reading: its end is still ahead.
    public func inForce(_ clock: OfflineClock) -> Bool {
        clock.offlineSeconds < endsAtOffline(clock)
    }

    /// Ended at the offline clock's reading, and not yet recorded as ended.
    public func endsUnrecorded(_ clock: OfflineClock) -> Bool {
        endedAt == nil && !inForce(clock)
    }

    /// Seconds left until the lease ends (0 when it has ended), at the clock's offline time
    /// or at `offline` (read since, without a checkpoint).
    public func remaining(_ clock: OfflineClock, offline: Int64? = nil) -> Int64 {
        max(0, endsAtOffline(clock) - (offline ?? clock.offlineSeconds))
    }

    /// The lease read on a clock that restarts at a contact or an administrator's unlock:
    /// `restarted` (`OfflineClock.started(at:)`) replaces `old`, which was read up to the
    /// same moment. When the wall clock is behind the offline clock (it was set back by more
    /// than `OfflineClock.rollbackTolerance`), the lease keeps what was left of it on the old
    /// clock and no more: it ends at `restarted.lastContact + remaining(old)`, so one contact
    /// neither lengthens a lease nor brings back one that ended. With an honest wall clock
    /// it is unchanged (a server that sends the same lease again is not granted it again).
    public func carried(from old: OfflineClock, to restarted: OfflineClock) -> OfflineLease {
        let behind = old.lastContact + old.offlineSeconds - restarted.lastContact
        guard behind > OfflineClock.rollbackTolerance else { return self }
        var carried = self
        carried.until = min(until, restarted.lastContact + remaining(old))
        return carried
    }

    public static let day: Int64 = 86_400

    /// Why a lease until `until`, asked at wall time `now`, cannot be granted under
    /// `maxDays` (`[offline_codes] max_lease_days`), in the words of the person asking; nil
    /// when it can. `untilText` is `until` as the caller shows times.
    public static func refusal(until: Int64, now: Int64, maxDays: Int, untilText: String) -> String? {
        if until <= now {
            return "a lease until \(untilText) ends before it begins (that time has passed); nothing was granted"
        }
        let limit = now + Int64(maxDays) * day
        if until > limit {
            return "a lease until \(untilText) would last \(RelativeTime.format(seconds: until - now)), "
                + "past the maximum of \(maxDays) day\(maxDays == 1 ? "" : "s") ([offline_codes] max_lease_days); nothing was granted"
        }
        return nil
    }

    /// The lease in words for history, the journal and `status`.
    public func describe(untilText: String) -> String {
        let by = source == .server ? "granted by the policy server (\(reference))" : "granted by an offline code (challenge \(reference))"
        return "offline lease until \(untilText), \(by)"
    }
}
