import LockwipeCore

/// A registration's SAP Mobile Services application connection.
public struct SAPConnectionRecord: Sendable, Equatable {
    /// The connection id (`X-SMP-APPCID`); nil while the server has not given one.
    public var id: String?
    /// Why there is no id yet (the server's answer had none); nil once there is one.
    public var problem: String?
    public var updatedAt: Int64
    /// SAP's full reset after a wipe: when the credentials and the id were forgotten
    /// (nil: never), and what became of the DELETE of the connection.
    public var resetAt: Int64? = nil
    public var resetConnection: String? = nil
    public var resetResult: String? = nil
}
