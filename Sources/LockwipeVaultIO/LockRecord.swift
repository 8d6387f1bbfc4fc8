/// Owner and mode of a vault directory as it was before a permission lock: what unlock restores.
public struct LockRecord: Sendable, Equatable {
    public var path: String
    public var uid: UInt32
    public var gid: UInt32
    public var mode: UInt32

    public init(path: String, uid: UInt32, gid: UInt32, mode: UInt32) {
        self.path = path
        self.uid = uid
        self.gid = gid
        self.mode = mode
    }
}
