import Foundation

/// A user's account as registration needs it.
public struct Account: Sendable, Equatable {
    public var name: String
    public var uid: UInt32
    public var gid: UInt32

    public init(name: String, uid: UInt32, gid: UInt32) {
        self.name = name
        self.uid = uid
        self.gid = gid
    }
}

/// Where registration finds a user's account: the system's user database (NSS) in the
/// daemon, a table in unit tests (which then need no real accounts).
public protocol AccountLookup: Sendable {
    func account(named name: String) -> Account?
}

/// The system's user database through NSS (`getpwnam_r`).
public struct SystemAccounts: AccountLookup {
    public init() {}

    public func account(named name: String) -> Account? {
        var pwd = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwnam_r(name, &pwd, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return Account(name: String(cString: pwd.pw_name), uid: pwd.pw_uid, gid: pwd.pw_gid)
    }
}
