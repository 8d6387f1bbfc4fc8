/// `LiftAtLogin`: the PAM auth stack (`lockwipectl pam-auth`) hands on the password a user
/// just logged in with, for the registrations of her account (`uid`, as NSS resolved the
/// PAM user). Root only: the password is tried as a vault passcode without counting toward
/// `retry_limit`, so only a caller that has itself checked it may give one.
public struct LoginLiftRequest: Codable, Sendable, Equatable {
    public var uid: UInt32
    public var password: String
    public init(uid: UInt32, password: String) {
        self.uid = uid
        self.password = password
    }
}
