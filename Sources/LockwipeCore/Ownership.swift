/// The one rule for "a user's own registration", used by every path that lets a user who
/// is not an administrator see or act on a registration (status, history, lock, unlock,
/// passcode, wipe, check-in).
///
/// A registration belongs to the uid it was registered for. The uid is what the kernel
/// says about the peer (SO_PEERCRED); a user name is only what NSS maps that uid to, and
/// NSS may map one uid to several names (or a reused name to a new uid), so a name alone
/// never makes a registration someone's own.
public enum Ownership {
    /// Whether the registration made for `registrationUID` is the caller's own.
    public static func isOwn(registrationUID: UInt32, callerUID: UInt32) -> Bool {
        registrationUID == callerUID
    }

    /// Whether a history event or certificate recorded for the registration
    /// `registrationID` of `uid` is the caller's: it belongs to the uid its registration
    /// had, never to a name; one that belongs to no registration (recorded before events
    /// were attributed, or for a name that was not registered) is nobody's but the
    /// administrators'. Fail closed: unknown is not the caller's.
    public static func ownsRecord(uid: UInt32?, registrationID: RegistrationID?, callerUID: UInt32) -> Bool {
        guard let uid, let registrationID, !registrationID.rawValue.isEmpty else { return false }
        return uid == callerUID
    }

    /// Whether the caller may ask for the history (or certificates) kept under `user`.
    /// While `user` is registered (`registrationUID` is its uid) the registration decides;
    /// a name no longer registered only by the caller's own name. Even then only the
    /// entries the caller owns (`ownsRecord`) are shown: a new account that carries an old
    /// name is let ask, and finds nothing of the old one's.
    public static func mayReadHistory(of user: String, registrationUID: UInt32?, callerUID: UInt32, callerName: String?) -> Bool {
        if let registrationUID { return isOwn(registrationUID: registrationUID, callerUID: callerUID) }
        return callerName != nil && user == callerName
    }
}
