/// Stable journal `MESSAGE_ID`s, one per event kind, so `journalctl MESSAGE_ID=...` and the
/// catalog find them. Never change an id once released.
public enum MessageID: String, CaseIterable, Sendable {
    case started = "0c6f874a471b476c80dbcee3b4b78230"
    case stopping = "0ceede1e5f064e5d88387033660330a6"
    case configReloaded = "cc457583ad0543b481bf8014c14f738e"
    case configInvalid = "f44afe5a4150418e81120a7720aae1bf"
    case registered = "41cf4a293b8a44e6add0058c264dedcc"
    case unregistered = "32dd8b5c370e4a97bb20d70d4ac1ff6c"
    case locked = "c69a6d8dfe254c728102495864746d95"
    case unlocked = "37e6cf6fa97441dca8750c5e23f7c720"
    case wipeStarted = "8299205be6874af6819425969b8260ad"
    case wipeResumed = "4d6b87f5094a4c07aaddbfe576cf3b3c"
    case wiped = "d49c84a1894b451284bd7cc56b4a78ea"
    case wipeIncomplete = "b593ad7b8f1645299119e0a6913eb1ad"
    case accessDenied = "895ca90492d14a428148615e5ff979e5"
    case clockRollback = "2768463987e044d1a5f1cf27e67d5a8f"
    case actionFailed = "962717f01dd74810989dbeb4dca409ce"
    case hookFailed = "6634976ae3844318b46a7223893d3ee4"
    /// A check-in reached the server and got its settings (a successful contact).
    case checkInOK = "049f382461ed4627825944168c347d59"
    /// The server answered a check-in with a lock or wipe order (403 TRAFFIC_REG_LOCKED or
    /// TRAFFIC_REG_WIPED); not a contact.
    case serverOrder = "eaab16888d86498aaec8db30972425f6"
    /// A check-in was not a contact: timeout, TLS, HTTP error, bad answer.
    case checkInFailed = "ce1d3d564ad148beb1e1a41af46c9fda"
    /// The server says the registration is blocked (403 TRAFFIC_BLOCKED and kin).
    case registrationBlocked = "61443cbf29af46a3b6d734a472097798"
    /// The server sent a policy that cannot be enforced; the last valid one is kept.
    case serverPolicyRejected = "ac7ef98728d24c7580c9b7203d3c8e14"
    /// A new server policy replaced the one in force for a registration.
    case serverPolicyApplied = "0552c6b5ee60459dbb5144e73d981a2e"
    /// Credentials of a registration were set or replaced (never their values).
    case credentialsChanged = "718a7839714a4a7fb8c8daab9bb976bb"
    /// The state database is missing, damaged or was replaced: nothing is enforced.
    case stateDamaged = "471f20d5adca4cf9a6f492401a109b66"
    /// Lock on logout (`lock_timeout`) cannot work: logind is not running or cannot be watched.
    case logoutLockUnavailable = "099c44df8d5c475ab516ef3467a47c3b"
    /// Crypto-erase: an encrypted vault's key was destroyed (kernel and every wrapped copy).
    case keyDestroyed = "15c30930616a45358287d388efd55eef"
    /// A wrong passcode was given for an encrypted vault (counted toward retry_limit).
    case passcodeWrong = "baf1a3a409f24558ba89cbe85d21e96a"
    /// A vault passcode was set or changed (the key was re-wrapped).
    case passcodeChanged = "4fdca705590d4183bb4a3cb1f3e9b595"
    /// A vault directory cannot be reached as registered (missing, renamed, replaced, or a
    /// symlink on its path): the action failed and nothing was touched.
    case vaultUnreachable = "11b4584a40f449368229dfdeaf304303"
    /// A lock was applied but did not verify (`root:root 0000`, or the key still in the
    /// kernel): the registration is `lock-failed` and the lock is retried.
    case lockFailed = "962008de2c2b4b24a1125629faed66bf"
    /// Something a user mounted on or inside a vault (a FUSE filesystem) was detached from
    /// the daemon's view before a lock or wipe, which then went on.
    case mountDetached = "aa93b7810de84f93b215f503fa022762"
    /// A filesystem call on a vault did not return within its deadline: the vault is
    /// unresponsive; its actions fail until the call returns, everyone else is served.
    case vaultUnresponsive = "37d502997d734cffb215f7ecb262366c"

    /// The policy server is reached over plain http:// (`[server] allow_insecure_http = true`).
    case insecureServer = "a58fa39160054e409371e2cf3cd254d8"

    /// A check-in answer (or a request cancelled by unregister) belonged to a registration
    /// that no longer exists; it was applied to nobody.
    case checkInDropped = "1c9fd3f6e6b74c34a039741d2e9b232f"

    /// The OAuth token endpoint refused a registration's refresh token (`invalid_grant`):
    /// its check-ins fail until an administrator re-enrols it with a new one.
    case oauthRefreshRefused = "0a8e9bb359af4c8e85451865e72e0d63"

    /// An offline-triggered lock or wipe is due within `[notify] warn_before`; once per
    /// registration and threshold.
    case warning = "5eced5a4f22c4178ba24f2447d4af383"

    /// One read or write of the state database failed (a full disk, an I/O error) where
    /// lockwiped carries on: the entry names what was not read or recorded and what follows.
    case stateUnavailable = "bff7f4931dfc4028b2fbfb40b853a776"

    /// A contact with the policy server made a server or offline lock liftable
    /// (`[lock] lift_after_contact = "at-login"`): it waits for its user's login.
    case lockLiftable = "2f5afe7a15e544cbb068d5de8094d6c6"

    /// A liftable lock was lifted at its user's login (the PAM auth stack handed the
    /// password on: `lockwipectl pam-auth`).
    case liftedAtLogin = "d197bcd72b20435092c745e4ee7c5ffd"
}
