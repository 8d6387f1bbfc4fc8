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
    /// The server is reached but refuses the machine: HTTP 403 without a known message code
    /// (application versioning, roles) or a 401 a token refresh did not cure; not a contact.
    case registrationRejected = "f3ffb8be6df64ff38098574bf1e3d15a"
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

    /// SAP Mobile Services: a registration's stored application connection was gone on the
    /// server (`GET Connections('{id}')` answered 404); a new one was registered.
    case connectionReplaced = "9b37a16d5a054dc9aa33300db7b8e0ca"

    /// SAP Mobile Services: after a server or offline wipe, the registration's token,
    /// refresh token and connection id were forgotten and its connection deleted (or the
    /// DELETE failed): SAP's full reset; the user must be enrolled again.
    case serverReset = "c37c70a88e6d465d9296c2998c44d67a"

    /// SAP Mobile Services: a registration's settings came without `blockWipingPolicy`
    /// (`ServerPolicyAbsence`); the policy in force is kept. Once, when it goes missing.
    case serverPolicyAbsent = "2d55fe1def674811b638159018d31fe5"

    /// An offline lease was granted to a registration (by an offline code or the policy
    /// server): the offline policy neither locks nor wipes it before the lease ends.
    case leaseGranted = "226413ba10b84a32aa252e01a478b240"
    /// An offline lease ended: the offline policy applies again from the lease's end.
    case leaseEnded = "d33b28c5d9384feca899185e88826f9f"
    /// An offline lease was refused (past `[offline_codes] max_lease_days`, or already
    /// over): the policy in force is unchanged.
    case leaseRefused = "6090f04e397c47c8a78e5dc4cc4c09df"

    /// An offline-code challenge was issued for a registration (docs/offline-codes.md).
    case offlineCodeChallenge = "9d044ce2e23a4d8e955fd6e380ece4d8"

    /// A helpdesk's response to an offline-code challenge was accepted and done.
    case offlineCodeAccepted = "e18b5ef7bf8b4b9b8e8bc58bf58636bd"

    /// An offline-code response was refused: wrong, without an outstanding challenge, or
    /// inside the back-off after wrong ones. It never counts toward retry_limit.
    case offlineCodeRefused = "3cc3f7123d074828a313f128b6417438"

    /// This machine's offline-code key was stored (provisioned) or replaced.
    case offlineCodesProvisioned = "51a9f4f7c87f4366bc4766a301aad30f"

    /// A contact with the policy server made a server or offline lock liftable
    /// (`[lock] lift_after_contact = "at-login"`): it waits for its user's login.
    case lockLiftable = "2f5afe7a15e544cbb068d5de8094d6c6"

    /// A liftable lock was lifted at its user's login (the PAM auth stack handed the
    /// password on: `lockwipectl pam-auth`).
    case liftedAtLogin = "d197bcd72b20435092c745e4ee7c5ffd"

    /// lockwiped's machine key (or offline-code key) was sealed with systemd's credentials:
    /// made sealed, or a plain key file of an older version sealed and destroyed.
    case keySealed = "ed474e8742c04bad9ba3f16d46b4e3d2"

    /// The sealed machine key does not open (a PCR changed, the TPM was cleared or
    /// replaced): every vault it wraps stays locked until it is recovered.
    case keyUnavailable = "fdc11460d90846a99d70c81061d8a8d3"

    /// A vault key was brought back with the organisation's recovery key
    /// (`lockwipectl recover`) and wrapped again; a machine key that could not be opened
    /// was set aside and made anew.
    case keyRecovered = "aa660deaef174e2ca524b171d22e1c8f"

    /// A vault's outbox was sealed to the organisation before a lock, wipe or unregister
    /// took it away from its applications (docs/outbox.md).
    case outboxSealed = "6c5aa627aadd486fbad9f58e13182950"

    /// A vault's outbox could not be sealed; the lock, wipe or unregister went on.
    case outboxSealFailed = "1c8da5bd5de94949ae648a71c7dfbfff"

    /// A sealed outbox reached the policy server, which gave its receipt.
    case outboxUploaded = "8f170f704c114f5ea95831418914f726"

    /// A sealed outbox could not be uploaded now; it is kept for the next contact.
    case outboxUploadFailed = "22e63204e0244decbe736d04466361da"

    /// Sealed outboxes not yet uploaded were destroyed with the vault by the offline
    /// policy's wipe (`[outbox] offline_wipe = "destroy"`).
    case outboxDestroyed = "ee8c76599dd944e88979a95df4d9b75b"
}
