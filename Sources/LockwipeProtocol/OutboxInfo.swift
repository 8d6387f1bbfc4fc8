/// A registration's outbox in `status` (docs/outbox.md): what its applications have pending
/// in the vault now, the sealed outboxes kept on the machine for the policy server, and
/// when it was last sealed and uploaded.
public struct OutboxInfo: Codable, Sendable, Equatable {
    /// `[outbox] directory`, relative to each vault directory; null when none is configured.
    public var directory: String?
    /// Pending in the vault now: files, bytes, and the oldest file's modification time (ISO
    /// 8601, UTC); null when not counted (a locked vault: its outbox was sealed at its
    /// lock; a wiped one), with `pending_problem` saying why when it could not be.
    public var pendingFiles: Int?
    public var pendingBytes: Int?
    public var pendingOldest: String?
    public var pendingProblem: String?
    /// Sealed outboxes kept on the machine, not yet received by the server.
    public var sealedKept: Int
    public var sealedKeptBytes: Int
    /// ISO 8601, UTC: the last seal and the last upload the server received; null when none.
    public var lastSealed: String?
    public var lastUploaded: String?

    public init(
        directory: String?, pendingFiles: Int?, pendingBytes: Int?, pendingOldest: String?, pendingProblem: String?, sealedKept: Int,
        sealedKeptBytes: Int, lastSealed: String?, lastUploaded: String?
    ) {
        self.directory = directory
        self.pendingFiles = pendingFiles
        self.pendingBytes = pendingBytes
        self.pendingOldest = pendingOldest
        self.pendingProblem = pendingProblem
        self.sealedKept = sealedKept
        self.sealedKeptBytes = sealedKeptBytes
        self.lastSealed = lastSealed
        self.lastUploaded = lastUploaded
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        // Explicit nulls: scripts can rely on the keys.
        try c.encode(directory, forKey: .directory)
        try c.encode(pendingFiles, forKey: .pendingFiles)
        try c.encode(pendingBytes, forKey: .pendingBytes)
        try c.encode(pendingOldest, forKey: .pendingOldest)
        try c.encode(pendingProblem, forKey: .pendingProblem)
        try c.encode(sealedKept, forKey: .sealedKept)
        try c.encode(sealedKeptBytes, forKey: .sealedKeptBytes)
        try c.encode(lastSealed, forKey: .lastSealed)
        try c.encode(lastUploaded, forKey: .lastUploaded)
    }

    enum CodingKeys: String, CodingKey {
        case directory
        case pendingFiles = "pending_files"
        case pendingBytes = "pending_bytes"
        case pendingOldest = "pending_oldest"
        case pendingProblem = "pending_problem"
        case sealedKept = "sealed_kept"
        case sealedKeptBytes = "sealed_kept_bytes"
        case lastSealed = "last_sealed"
        case lastUploaded = "last_uploaded"
    }
}
