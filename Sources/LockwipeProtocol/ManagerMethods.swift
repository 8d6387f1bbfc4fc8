/// The methods of `io.lockwipe.Manager`, each declared once (`VarlinkMethod`): its name,
/// its parameter and reply types and its text in `InterfaceDescription.manager`, in the
/// order the description lists them. Adding a method: declare it here and add it to `all`,
/// bind its handler in the daemon (`ControlServer.bindings`), and write its who-may rule
/// (`WhoMay` in LockwipeCore); docs/architecture.md, "How to add a varlink method".
public enum ManagerMethods {
    static let interface = InterfaceDescription.managerName
    public static let getStatus = VarlinkMethod<StatusRequest, StatusReport>(
        interface, "GetStatus",
        """
        # Whether this machine answers offline codes (docs/offline-codes.md), and the machine
        # id they carry (or why the stored key is not usable); provision_epoch: the key epoch
        # `provision` derives the key for.
        type OfflineCodes (provisioned: bool, machine: ?string, provision_epoch: ?int)

        # How lockwiped's machine key is kept at rest (docs/key-material.md): "tpm2" (sealed
        # to this machine's TPM2 and the host key), "host" (the host key only), "plain" (a
        # plain file), null before one is made; problem: why it cannot be opened, or null;
        # recovery_key: the organisation recovery key every vault key is also sealed to
        # (its identifier), or null. Absent while lockwiped is opening it (the start-up pass).
        type MachineKey (sealing: ?string, problem: ?string, recovery_key: ?string)

        # The registrations the caller may see (all for administrators, their own otherwise).
        # Answered during the start-up pass too (starting_up: true), but for the login
        # gate (login_gate: true), which gets StartingUp until the pass has ended.
        method GetStatus(user: ?string, login_gate: ?bool) -> (
          version: string,
          server: Server,
          policy: PolicyInfo,
          registrations: []Registration,
          warnings: []string,
          starting_up: ?bool,
          offline_codes: ?OfflineCodes,
          machine_key: ?MachineKey
        )
        """)
    public static let getPolicy = VarlinkMethod<NoParameters, PolicyInfo>(
        interface, "GetPolicy",
        """
        method GetPolicy() -> (offline_days_before_lock: int, offline_days_before_wipe: int, source: string)
        """)
    public static let getHistory = VarlinkMethod<HistoryRequest, HistoryReply>(
        interface, "GetHistory",
        """
        # limit: the newest that many events (default 1000, at most 10000); 0 returns none.
        # since: only events at or after this time (seconds since the epoch).
        # truncated: true when older events were left out to keep the reply within 4 MiB
        # (the newest are kept); absent otherwise.
        method GetHistory(user: ?string, limit: ?int, since: ?int) -> (events: []Event, truncated: ?bool)
        """)
    public static let getCertificate = VarlinkMethod<CertificateRequest, CertificateReply>(
        interface, "GetCertificate",
        """
        # The newest certificate of the user's wipes, or the one with id (administrators,
        # and the user whose data it is: the uid of the registration it was made for).
        method GetCertificate(user: string, id: ?string) -> (certificate: Certificate)
        """)
    public static let lock = VarlinkMethod<TargetSelection, ActionReply>(
        interface, "Lock",
        """
        # Exactly one of user or all; an ordinary user naming neither locks her own
        # registration. With preview, nothing is locked: each result lists the processes
        # the lock would end.
        method Lock(user: ?string, all: ?bool, preview: ?bool) -> (results: []ActionResult)
        """)
    public static let unlock = VarlinkMethod<UnlockRequest, ActionReply>(
        interface, "Unlock",
        """
        # An encrypted vault whose key a passcode wraps needs the passcode; an expired
        # passcode must be replaced in the same request (new_passcode).
        method Unlock(user: string, passcode: ?string, new_passcode: ?string) -> (results: []ActionResult)
        """)
    public static let setPasscode = VarlinkMethod<PasscodeRequest, ActionReply>(
        interface, "SetPasscode",
        """
        # Without current: the first passcode of a vault the machine key wraps; with it: a change.
        method SetPasscode(user: string, current: ?string, new: string) -> (results: []ActionResult)
        """)
    public static let wipe = VarlinkMethod<TargetSelection, ActionReply>(
        interface, "Wipe",
        """
        # Irreversible. Exactly one of user or all.
        method Wipe(user: ?string, all: ?bool) -> (results: []ActionResult)
        """)
    public static let previewWipe = VarlinkMethod<TargetSelection, WipePreviewReply>(
        interface, "PreviewWipe",
        """
        # What a wipe would do now (census, media, caveats), changing nothing; method is
        # crypto-erase, overwrite or unlink. Exactly one of user or all; who may Wipe.
        type WipePreview (
          user: string,
          path: string,
          method: string,
          passes: int,
          pattern: string,
          files: int,
          bytes: int,
          directories: int,
          other_entries: int,
          mount_points: []string,
          partial: bool,
          media: ?MediaFacts,
          caveats: []WipeCaveat,
          problem: ?string
        )

        method PreviewWipe(user: ?string, all: ?bool) -> (previews: []WipePreview)
        """)
    public static let register = VarlinkMethod<RegisterRequest, ActionReply>(
        interface, "Register",
        """
        # The credentials (token, client key, OAuth refresh token) are stored root-only and
        # never shown or logged. outbox: the vault's outbox, relative to each directory, in
        # place of [outbox] directory (docs/outbox.md).
        method Register(
          user: string,
          directories: []string,
          token: ?string,
          client_certificate: ?string,
          client_key: ?string,
          require_encryption: ?bool,
          passcode: ?string,
          refresh_token: ?string,
          outbox: ?string
        ) -> (results: []ActionResult)
        """)
    public static let setCredentials = VarlinkMethod<CredentialsRequest, ActionReply>(
        interface, "SetCredentials",
        """
        # Replaces all credentials of a registration (absent fields are removed).
        method SetCredentials(
          user: string,
          token: ?string,
          client_certificate: ?string,
          client_key: ?string,
          refresh_token: ?string
        ) -> (results: []ActionResult)
        """)
    public static let unregister = VarlinkMethod<UserParameter, ActionReply>(
        interface, "Unregister",
        """
        method Unregister(user: string) -> (results: []ActionResult)
        """)
    public static let checkIn = VarlinkMethod<UserFilter, ActionReply>(
        interface, "CheckIn",
        """
        # Without user: every registration (administrators), or the caller's own.
        method CheckIn(user: ?string) -> (results: []ActionResult)
        """)
    public static let offlineCodeChallenge = VarlinkMethod<OfflineCodeChallengeRequest, OfflineCodeChallengeReply>(
        interface, "OfflineCodeChallenge",
        """
        # A new single-use challenge for the helpdesk (docs/offline-codes.md): to lift the
        # registration's lock, or with extend_days to extend its offline lease. It replaces
        # the registration's previous one. Without user: the caller's own registration.
        method OfflineCodeChallenge(user: ?string, extend_days: ?int) -> (
          user: string,
          challenge: string,
          machine: string,
          request: string
        )
        """)
    public static let offlineCodeEnter = VarlinkMethod<OfflineCodeEnterRequest, ActionReply>(
        interface, "OfflineCodeEnter",
        """
        # The helpdesk's response to the registration's outstanding challenge: does what it
        # asked, once. Wrong responses back off as wrong passcodes do and never wipe.
        method OfflineCodeEnter(user: ?string, code: string) -> (results: []ActionResult)
        """)
    public static let provisionOfflineCodes = VarlinkMethod<ProvisionOfflineCodesRequest, ProvisionOfflineCodesReply>(
        interface, "ProvisionOfflineCodes",
        """
        # Stores this machine's offline-code key (hex), derived from the fleet secret for
        # machine (its id in the challenges); root-only, never shown or logged.
        method ProvisionOfflineCodes(machine: string, machine_key: string) -> (machine: string, detail: string)
        """)
    public static let liftAtLogin = VarlinkMethod<LoginLiftRequest, ActionReply>(
        interface, "LiftAtLogin",
        """
        # The PAM auth stack (lockwipectl pam-auth) hands on the password the user with this
        # uid just logged in with: a server or offline lock a contact made liftable is lifted,
        # an encrypted vault whose passcode is that password opened. Root only; a wrong
        # password never counts toward retry_limit. One result per registration of the uid.
        method LiftAtLogin(uid: int, password: string) -> (results: []ActionResult)
        """)
    public static let getRecoveryWraps = VarlinkMethod<RecoveryWrapsRequest, RecoveryWrapsReply>(
        interface, "GetRecoveryWraps",
        """
        # The vault keys of encrypted vaults as sealed to the organisation's recovery key
        # ([keys] recovery_public_key; docs/key-material.md, "Recovery"): of user, or of
        # every registration. missing: the encrypted vaults that have none, and why.
        # Administrators only.
        type RecoveryWrap (
          user: string,
          registration_id: string,
          recovery_key: string,
          encapsulated: string,
          sealed: string
        )

        type RecoveryMissing (user: string, reason: string)

        method GetRecoveryWraps(user: ?string) -> (wraps: []RecoveryWrap, missing: []RecoveryMissing)
        """)
    public static let recover = VarlinkMethod<RecoverRequest, ActionReply>(
        interface, "Recover",
        """
        # A vault key (base64) the caller opened from its recovery wrap with the
        # organisation's private key (lockwipectl recover), for the registration with
        # registration_id: checked against the vault's key identifier, then wrapped again,
        # under new_passcode or the machine key (a machine key that cannot be opened is set
        # aside and a new one sealed to the machine as it is now). A vault locked because
        # its key could not be opened at start-up is opened. Administrators only.
        method Recover(user: string, registration_id: string, key: string, new_passcode: ?string) -> (results: []ActionResult)
        """)
    /// Every method of the interface, in the order of its description.
    public static let all: [any VarlinkMethodDeclaration] = [
        getStatus, getPolicy, getHistory, getCertificate, lock, unlock, setPasscode, wipe, previewWipe, register, setCredentials, unregister, checkIn,
        offlineCodeChallenge, offlineCodeEnter, provisionOfflineCodes, liftAtLogin, getRecoveryWraps, recover,
    ]
}

/// The methods of `org.varlink.service`, which every varlink service provides.
public enum ServiceMethods {
    static let interface = InterfaceDescription.serviceName
    public static let getInfo = VarlinkMethod<NoParameters, ServiceInfo>(
        interface, "GetInfo",
        """
        method GetInfo() -> (
          vendor: string,
          product: string,
          version: string,
          url: string,
          interfaces: []string
        )
        """)
    public static let getInterfaceDescription = VarlinkMethod<InterfaceDescriptionRequest, InterfaceDescriptionReply>(
        interface, "GetInterfaceDescription",
        """
        method GetInterfaceDescription(interface: string) -> (description: string)
        """)
    public static let all: [any VarlinkMethodDeclaration] = [getInfo, getInterfaceDescription]
}

/// The methods as members of `VarlinkMethod`, so that a call names them as `.lock`
/// (`client.call(.lock, TargetSelection(user: "alice"))`) and the compiler checks the
/// parameters and the reply against the declaration.
extension VarlinkMethod {
    public static var getStatus: VarlinkMethod<StatusRequest, StatusReport> { ManagerMethods.getStatus }
    public static var getPolicy: VarlinkMethod<NoParameters, PolicyInfo> { ManagerMethods.getPolicy }
    public static var getHistory: VarlinkMethod<HistoryRequest, HistoryReply> { ManagerMethods.getHistory }
    public static var getCertificate: VarlinkMethod<CertificateRequest, CertificateReply> { ManagerMethods.getCertificate }
    public static var lock: VarlinkMethod<TargetSelection, ActionReply> { ManagerMethods.lock }
    public static var unlock: VarlinkMethod<UnlockRequest, ActionReply> { ManagerMethods.unlock }
    public static var setPasscode: VarlinkMethod<PasscodeRequest, ActionReply> { ManagerMethods.setPasscode }
    public static var wipe: VarlinkMethod<TargetSelection, ActionReply> { ManagerMethods.wipe }
    public static var previewWipe: VarlinkMethod<TargetSelection, WipePreviewReply> { ManagerMethods.previewWipe }
    public static var register: VarlinkMethod<RegisterRequest, ActionReply> { ManagerMethods.register }
    public static var setCredentials: VarlinkMethod<CredentialsRequest, ActionReply> { ManagerMethods.setCredentials }
    public static var unregister: VarlinkMethod<UserParameter, ActionReply> { ManagerMethods.unregister }
    public static var checkIn: VarlinkMethod<UserFilter, ActionReply> { ManagerMethods.checkIn }
    public static var offlineCodeChallenge: VarlinkMethod<OfflineCodeChallengeRequest, OfflineCodeChallengeReply> { ManagerMethods.offlineCodeChallenge }
    public static var offlineCodeEnter: VarlinkMethod<OfflineCodeEnterRequest, ActionReply> { ManagerMethods.offlineCodeEnter }
    public static var provisionOfflineCodes: VarlinkMethod<ProvisionOfflineCodesRequest, ProvisionOfflineCodesReply> {
        ManagerMethods.provisionOfflineCodes
    }
    public static var liftAtLogin: VarlinkMethod<LoginLiftRequest, ActionReply> { ManagerMethods.liftAtLogin }
    public static var getRecoveryWraps: VarlinkMethod<RecoveryWrapsRequest, RecoveryWrapsReply> { ManagerMethods.getRecoveryWraps }
    public static var recover: VarlinkMethod<RecoverRequest, ActionReply> { ManagerMethods.recover }
}
