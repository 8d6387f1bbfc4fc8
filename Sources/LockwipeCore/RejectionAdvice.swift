/// What an administrator should check when the policy server is reached but refuses a
/// registration (`CheckInOutcome.rejected`: a 401 a refresh did not cure, or a 403
/// without a known order), in the words of the protocol in use and of the credentials
/// the registration has: said in the check-in's result, the journal, the
/// `warnRejected` hook and `status`. Pure.
///
/// - A 401 of a registration with no stored credentials: it showed the server nothing,
///   so the one thing to do is to give it some (`lockwipectl credentials`).
/// - lockwipe's own protocol: the bearer token, and whether the server knows the user.
/// - SAP Mobile Services: application versioning, the user's roles, the credentials and
///   the application connection (docs/server-protocol.md, "Rejected check-ins"), which
///   mean nothing to a lockwipe-protocol server.
public enum RejectionAdvice {
    public static func text(status: Int, serverProtocol: ServerProtocol, hasCredentials: Bool, oauth: Bool, user: String) -> String {
        let credentials = "lockwipectl credentials \(user) \(oauth ? "--refresh-token-file PATH" : "--token-file PATH")"
        if status == 401, !hasCredentials {
            return "the registration has no credentials to show the server: store them (\(credentials))"
        }
        switch serverProtocol {
        case .lockwipe:
            return "check the registration's bearer token (replace it with \(credentials)) and that the server serves \(user)"
        case .sapMobileServices:
            return "check application versioning ([server] application_version against the versions active for the app), "
                + "the user's roles, the registration's credentials (\(credentials)) and its application connection"
        }
    }
}
