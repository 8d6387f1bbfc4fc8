import LockwipeCore
import LockwipeVaultIO

/// A registration as the daemon keeps it.
public struct RegistrationRecord: Sendable, Equatable {
    public var user: String
    public var uid: UInt32
    public var state: RegistrationState
    public var protection: Protection
    public var directories: [String]
    public var lockTrigger: Trigger?
    public var blocked: Bool
    public var clock: OfflineClock
    public var lastWipe: WipeSummary?
    /// What the policy server said and when it was last tried.
    public var server = ServerRecord()
    /// Which registration this is: a fresh random id at every registration (`RegistrationID`).
    public var id = RegistrationID.new()

    /// The device and inode of each directory (same order as `directories`), recorded at
    /// registration; nil for one registered before they were recorded (`v5-vault-identity`)
    /// until start-up records it.
    public var identities: [VaultDirectory.Identity?] = []
    /// Why the last action could not reach the vault (missing, replaced, lock not
    /// verified), until an action succeeds again; shown in `status` as `vault_error`.
    public var vaultError: String?
    /// The threshold last warned about (`OfflineWarning.threshold`), nil before any warning.
    public var warnedThreshold: String?
    /// The offline lease granted last (`v15-offline-lease`), in force or ended; nil: none.
    public var lease: OfflineLease?
    /// Why the lease the policy server asks for was refused (past `max_lease_days`), while
    /// it keeps asking for it; nil otherwise.
    public var leaseRefused: String?
    /// A contact made the server or offline lock liftable (`PolicyLockLift`): the user's
    /// login or passcode lifts it. Cleared by the store whenever the state or lock trigger
    /// is written again (`v17-lock-liftable`).
    public var lockLiftable = false
    /// Its own outbox directory (`register --outbox`, `v22-outbox`), in place of
    /// `[outbox] directory`; nil: the configuration's.
    public var outbox: String?

    /// The vault directories with their recorded identities: what every action opens.
    public var vaults: [VaultDirectory] {
        directories.enumerated().map { i, path in VaultDirectory(path: path, identity: i < identities.count ? identities[i] : nil) }
    }
}
