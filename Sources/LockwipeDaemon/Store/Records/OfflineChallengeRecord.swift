import LockwipeCore

/// A registration's offline-code row (`offline_codes`): its outstanding challenge, if any,
/// and the wrong responses in a row (which outlive a new challenge: asking again does not
/// reset the back-off).
public struct OfflineChallengeRecord: Sendable, Equatable {
    public var user: String
    /// The registration the row belongs to: a row left by an earlier registration of the
    /// same name answers nothing.
    public var registrationID: RegistrationID
    /// The outstanding challenge's counter; nil when none is outstanding (used, or never asked).
    public var counter: UInt32?
    /// 0: lift the lock; otherwise extend the offline lease by this many days.
    public var days: Int
    public var issuedAt: Int64?
    public var failures: Int
    public var failedAt: Int64?

    public init(
        user: String, registrationID: RegistrationID, counter: UInt32?, days: Int, issuedAt: Int64?, failures: Int, failedAt: Int64?
    ) {
        self.user = user
        self.registrationID = registrationID
        self.counter = counter
        self.days = days
        self.issuedAt = issuedAt
        self.failures = failures
        self.failedAt = failedAt
    }
}
