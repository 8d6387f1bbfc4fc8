/// Owner and mode of a vault directory as it was before a permission lock: what unlock restores.
public struct LockRecord: Sendable, Equatable {
    public var path: String
    public var uid: UInt32
    public var gid: UInt32
    public var mode: UInt32
}
