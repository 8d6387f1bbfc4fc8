import LockwipeCore
import LockwipeVaultIO

/// One registration's outbox as `status` shows it (issue 44, docs/outbox.md): what its
/// applications have pending in the vault now, the sealed outboxes kept on the machine
/// for the server, and when it was last sealed and uploaded.
struct OutboxStatus: Sendable {
    /// `[outbox] directory`, relative to each vault directory; nil when none is configured
    /// now (sealed outboxes of an earlier configuration may still be kept).
    var directory: String?
    /// What is pending in the vault's outbox, counted now; nil when it was not counted
    /// (the vault is locked or wiped: sealed at its lock, or gone) or could not be.
    var pending: OutboxReader.Summary?
    /// Why it could not be counted.
    var pendingProblem: String?
    /// The sealed outboxes kept on the machine for the server, oldest first.
    var kept: [SealedOutboxes.Kept]
    var lastSealed: Int64?
    var lastUploaded: Int64?
}
