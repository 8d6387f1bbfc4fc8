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

    /// Whether the history kept under `user` is the caller's to read. While `user` is
    /// registered (`registrationUID` is its uid) the registration decides; the history of
    /// a name no longer registered is its user's, found by the caller's own name.
    public static func mayReadHistory(of user: String, registrationUID: UInt32?, callerUID: UInt32, callerName: String?) -> Bool {
        if let registrationUID { return isOwn(registrationUID: registrationUID, callerUID: callerUID) }
        return callerName != nil && user == callerName
    }
}
