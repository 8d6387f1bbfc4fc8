/// SAP's full reset after a wipe, decided without I/O: on `TRAFFIC_REG_WIPED` SAP's
/// clients give up the registration, so after a server or offline wipe of a registration
/// of a SAP Mobile Services server lockwiped forgets its token, refresh token and
/// application connection id and deletes the connection (docs/server-protocol.md).
public enum ServerReset {
    /// Whether a wipe with `trigger` resets the registration's server identity: only with
    /// SAP Mobile Services and only for the wipes the server stands behind (its order, or its
    /// offline policy). A wipe an administrator or the user asks for keeps the enrolment.
    public static func applies(protocol serverProtocol: ServerProtocol, trigger: Trigger) -> Bool {
        guard serverProtocol == .sapMobileServices else { return false }
        switch trigger {
        case .server, .offline: return true
        default: return false
        }
    }

    /// The commands that enrol `user` again (`status`, the journal): a new registration with
    /// new credentials (a refresh token with `[server.oauth]`, else a token).
    public static func enrolCommands(user: String, oauth: Bool) -> String {
        let credential = oauth ? "--refresh-token-file PATH" : "--token-file PATH"
        return "lockwipectl unregister --user \(user), then lockwipectl register --user \(user) --dir DIR \(credential)"
    }

    /// What the reset says while the DELETE of `connection` has not answered yet.
    public static func pendingResult(connection: String?) -> String {
        connection == nil ? "no connection to delete" : "pending"
    }

    /// What the DELETE came to: nil (done; a 404 counts, the connection is gone either way)
    /// or why not.
    public static func result(deleteFailure: String?) -> String {
        deleteFailure.map { "not deleted: \($0)" } ?? "deleted"
    }
}
