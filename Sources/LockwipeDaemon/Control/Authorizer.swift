import Foundation
import LockwipeSystemd

/// Who is calling, as far as the daemon will trust it: from `SO_PEERCRED`, never from
/// anything the client says.
public struct Caller: Sendable, Equatable {
    public var credentials: PeerCredentials
    /// The caller's user name, when its uid has one.
    public var userName: String?
    /// Root, or a member of the configured admin group.
    public var isAdmin: Bool
    /// Whether the configured admin group existed when the caller was looked up.
    public var adminGroupExists = true

    public init(credentials: PeerCredentials, userName: String?, isAdmin: Bool, adminGroupExists: Bool = true) {
        self.credentials = credentials
        self.userName = userName
        self.isAdmin = isAdmin
        self.adminGroupExists = adminGroupExists
    }
}

/// Decides who is an administrator. Fails closed: unknown uid, unknown group or any lookup
/// error means "not an administrator" (usbguard once failed open on a missing group).
public struct Authorizer: Sendable {
    public var adminGroup: String

    public init(adminGroup: String) {
        self.adminGroup = adminGroup
    }

    public func caller(_ credentials: PeerCredentials) -> Caller {
        let name = Self.userName(uid: credentials.uid)
        let gid = Self.groupID(adminGroup)
        return Caller(
            credentials: credentials, userName: name, isAdmin: isAdmin(credentials, name: name, adminGID: gid),
            adminGroupExists: gid != nil)
    }

    /// Whether the configured admin group exists (for a start-up warning).
    public var adminGroupExists: Bool { Self.groupID(adminGroup) != nil }

    private func isAdmin(_ c: PeerCredentials, name: String?, adminGID: UInt32?) -> Bool {
        if c.uid == 0 { return true }
        guard let gid = adminGID else { return false }
        if c.gid == gid { return true }
        guard let name else { return false }
        return Self.groups(of: name, primary: c.gid).contains(gid)
    }

    static func userName(uid: UInt32) -> String? {
        var pwd = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16_384)
        guard getpwuid_r(uid, &pwd, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return String(cString: pwd.pw_name)
    }

    static func groupID(_ name: String) -> UInt32? {
        var grp = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 65_536)
        guard getgrnam_r(name, &grp, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return grp.gr_gid
    }

    static func groups(of user: String, primary: UInt32) -> [UInt32] {
        var count: Int32 = 64
        for _ in 0..<4 {
            var list = [gid_t](repeating: 0, count: Int(count))
            var n = count
            if getgrouplist(user, primary, &list, &n) >= 0 { return Array(list.prefix(Int(n))) }
            count = max(n, count * 2)
        }
        return []
    }
}
