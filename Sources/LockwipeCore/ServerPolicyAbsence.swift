/// SAP Mobile Services settings without `blockWipingPolicy`, decided without I/O.
///
/// A tenant answers the user's settings read with what that user may read: when the
/// Storage service's ReadRoles hide the policy from the user, the answer simply has no
/// `blockWipingPolicy`, exactly as when no policy was ever set. lockwipe cannot tell the
/// two apart, so it does not read an absent section as "off": the policy in force is kept
/// (the last server policy, or the local `[policy]` before the first), and `status` and the
/// journal (once, when the section goes missing) say so. A policy switched off in the
/// cockpit arrives as `blockWipeEnabled` false and still turns offline lock and wipe off.
public enum ServerPolicyAbsence {
    /// What status and the journal say.
    public static let note =
        "the server's settings have no blockWipingPolicy (not set for this application, or hidden from this user by the Storage service's ReadRoles): "
        + "the policy in force is kept; to switch offline lock and wipe off, set blockWipeEnabled to false"

    /// Whether `settings` (as stored after a contact) lack the policy section: SAP only, and
    /// not when the section is there but unusable (that is a rejected policy).
    public static func isAbsent(protocol serverProtocol: ServerProtocol, _ settings: ServerSettings?) -> Bool {
        guard serverProtocol == .sapMobileServices, let settings, settings.lockWipe == nil else { return false }
        return !settings.problems.contains { $0.key.hasPrefix("blockWipingPolicy") }
    }

    /// Whether a contact that brought `new` should say so in the journal: the section went
    /// missing now (the settings before had it, or there were none).
    public static func shouldJournal(protocol serverProtocol: ServerProtocol, before: ServerSettings?, new: ServerSettings) -> Bool {
        isAbsent(protocol: serverProtocol, new) && !isAbsent(protocol: serverProtocol, before)
    }
}
