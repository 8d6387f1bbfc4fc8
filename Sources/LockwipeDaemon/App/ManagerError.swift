import LockwipeCore

/// Why a request to the Manager failed, in the domain's words. The domain never speaks
/// the wire: the control layer maps each case to one varlink error
/// (`ControlServer.wireError(_:)`), and the CLI switches on those errors' names.
public enum ManagerError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The caller may not do this; the reason says why.
    case notPermitted(String)
    /// No registration for this user name.
    case noSuchRegistration(String)
    /// No wipe of this user has a certificate (with this id, when one was asked for).
    case noSuchCertificate(user: String, id: String?)
    /// Registration was refused; the reason names every problem.
    case registrationRefused(String)
    /// A request parameter cannot be used as given.
    case invalidParameter(String, reason: String)
    /// The action was tried and failed, or cannot be done in the registration's state.
    case actionFailed(String)
    /// Not possible in the registration's state (`current`): a lock of a wipe-committed
    /// registration, an unlock of one that is not locked, and the like. The wire says
    /// `ActionFailed` with the reason, as before this case existed.
    case wrongState(user: String, current: RegistrationState, reason: String)
    /// The vault key is wrapped by the user's passcode and the request gave none.
    case passcodeRequired(user: String, reason: String)
    /// The passcode was right but has expired: the request must bring a new one.
    case passcodeExpired(user: String, reason: String)

    /// The one sentence an operator reads.
    public var message: String {
        switch self {
        case .notPermitted(let reason), .registrationRefused(let reason), .actionFailed(let reason), .wrongState(_, _, let reason),
            .invalidParameter(_, let reason), .passcodeRequired(_, let reason), .passcodeExpired(_, let reason):
            return reason
        case .noSuchRegistration(let user):
            return "no registration for user \(user)"
        case .noSuchCertificate(let user, let id):
            return id.map { "no certificate \($0) for user \(user)" } ?? "no wipe of user \(user) has a certificate"
        }
    }

    public var description: String { message }
}

extension ManagerError {
    /// The domain error for a refusal of `UnlockRule`.
    init(_ refusal: UnlockRule.Refusal, user: String) {
        switch refusal.kind {
        case .notPermitted: self = .notPermitted(refusal.message)
        case .actionFailed: self = .actionFailed(refusal.message)
        case .invalidParameter(let name): self = .invalidParameter(name, reason: refusal.message)
        case .passcodeRequired: self = .passcodeRequired(user: user, reason: refusal.message)
        case .passcodeExpired: self = .passcodeExpired(user: user, reason: refusal.message)
        }
    }
}
