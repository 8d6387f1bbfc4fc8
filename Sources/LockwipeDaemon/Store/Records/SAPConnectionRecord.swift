import LockwipeCore

/// A registration's SAP Mobile Services application connection.
public struct SAPConnectionRecord: Sendable, Equatable {
    /// The connection id (`X-SMP-APPCID`); nil while the server has not given one.
    public var id: String?
    /// Why there is no id yet (the server's answer had none); nil once there is one.
    public var problem: String?
    public var updatedAt: Int64
}
