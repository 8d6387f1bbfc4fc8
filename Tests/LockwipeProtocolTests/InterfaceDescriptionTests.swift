import Foundation
import LockwipeProtocol
import Testing

/// The interface description is assembled from the method declarations; what it says on
/// the wire must stay exactly what it was when it was one text (the fixtures below, as it
/// was before the declarations), so that no client sees a change.
@Suite struct InterfaceDescriptionTests {
    @Test func theManagerInterfaceIsByteForByteTheSame() {
        #expect(InterfaceDescription.manager == Self.manager)
    }

    @Test func theServiceInterfaceIsByteForByteTheSame() {
        #expect(InterfaceDescription.service == Self.service)
    }

    @Test func eachMethodIsDeclaredOnceWithItsNameInItsDefinition() {
        let all = ManagerMethods.all + ServiceMethods.all
        #expect(Set(all.map(\.name)).count == all.count)
        for method in all {
            let description = method.interface == InterfaceDescription.managerName ? InterfaceDescription.manager : InterfaceDescription.service
            #expect(method.definition.contains("method \(method.member)("), "\(method.name)")
            #expect(description.components(separatedBy: "method \(method.member)(").count == 2, "\(method.name)")
        }
        #expect(ManagerMethods.lock.name == "io.lockwipe.Manager.Lock")
        #expect(ServiceMethods.getInfo.name == "org.varlink.service.GetInfo")
    }

    static let manager = """
        # Lock and wipe of registered users' data on a shared machine (lockwiped).
        interface io.lockwipe.Manager

        type Server (configured: bool, url: ?string)

        type PolicyInfo (offline_days_before_lock: int, offline_days_before_wipe: int, source: string, warn_before_seconds: ?int)

        type NextAction (action: string, at: string)

        # An offline lock or wipe due within [notify] warn_before.
        type Warning (action: string, at: string, in_seconds: int)

        type ServerReset (at: string, connection: ?string, delete_result: string, enrol: string)

        # An offline lease: the offline policy neither locks nor wipes before until.
        type Lease (
          until: string,
          granted_at: string,
          source: string,
          reference: string,
          in_force: bool,
          remaining_seconds: int,
          ended_at: ?string
        )

        type Skipped (path: string, reason: string)

        # A block device under a vault's file system; absent facts were not readable.
        type MediaDevice (
          name: string,
          partition: ?string,
          model: ?string,
          serial: ?string,
          rotational: ?bool,
          backing_file: ?string
        )

        type MediaFacts (path: string, filesystem: string, filesystem_uuid: ?string, devices: []MediaDevice)

        # kind: copy-on-write, snapshots, shared-extents, names or non-rotational.
        type WipeCaveat (kind: string, path: string, detail: string)

        type WipeSummary (
          files_overwritten: int,
          bytes_overwritten: int,
          entries_removed: int,
          skipped: []Skipped,
          elapsed_seconds: float,
          passes: int,
          pattern: string,
          attributes_cleared: int,
          complete: bool,
          key_destroyed_at: ?string,
          key_destroyed_seconds: ?float,
          media: []MediaFacts,
          caveats: []WipeCaveat
        )

        # The policy server is reached but rejects the registration (403 without a known
        # message code, 401 a refresh did not cure); check: what an administrator should check.
        type Rejection (http_status: int, text: string, since: ?string, check: string)

        # A registration's outbox (docs/outbox.md): pending_*, what its applications have
        # pending in the vault now (null when not counted: a locked or wiped vault, or
        # pending_problem); sealed_kept*, the sealed outboxes kept for the server.
        type Outbox (
          directory: ?string,
          pending_files: ?int,
          pending_bytes: ?int,
          pending_oldest: ?string,
          pending_problem: ?string,
          sealed_kept: int,
          sealed_kept_bytes: int,
          last_sealed: ?string,
          last_uploaded: ?string
        )

        # at_rest: what a copy of the disk gets of the vault: "tpm2" (nothing: its key opens
        # only with this machine's TPM2), "host" or "disk" (a copy opens it: the machine key
        # is sealed with the host key only, or is a plain file), "passcode" (open to offline
        # guessing of the passcode), "none" (a permission vault); absent once wiped.
        type Registration (
          user: string,
          uid: int,
          state: string,
          protection: string,
          directories: []string,
          blocked: bool,
          last_contact: string,
          offline_seconds: int,
          next_action: ?NextAction,
          lock_trigger: ?string,
          lock_liftable: ?bool,
          lock_waits_for: ?string,
          logout_lock_at: ?string,
          wipe: ?WipeSummary,
          policy: ?PolicyInfo,
          policy_source: ?string,
          blocked_code: ?string,
          rejected: ?Rejection,
          last_attempt: ?string,
          last_error: ?string,
          next_check_in: ?string,
          sap_connection: ?string,
          sap_connection_problem: ?string,
          sap_reset: ?ServerReset,
          server_policy_note: ?string,
          sap_password_policy_lock_timeout: ?int,
          credentials: ?string,
          key_wrapping: ?string,
          passcode_expires: ?string,
          failed_unlocks: ?int,
          retry_limit: ?int,
          vault_error: ?string,
          warning: ?Warning,
          registration_id: ?string,
          lease: ?Lease,
          at_rest: ?string,
          outbox: ?Outbox
        )

        # A process a lock would end (Lock with preview).
        type ProcessEntry (pid: int, comm: string, uid: int)

        type ActionResult (
          user: string,
          action: string,
          state: ?string,
          detail: string,
          wipe: ?WipeSummary,
          failed: ?bool,
          processes: ?[]ProcessEntry,
          lifted: ?bool,
          undo: ?string,
          undone_by_asker: ?bool
        )

        # Who asked for a wipe: the lockwipectl peer, the policy server, the offline
        # policy or the passcode retry limit.
        type WipeRequester (peer_uid: ?int, server: ?string, policy: ?string, retry_limit: ?int)

        type CertificateHost (hostname: string, machine_id: ?string)

        # at_rest: what a copy of the disk got of the vault until the wipe (tpm2, host, disk,
        # passcode, none; docs/key-material.md); absent in certificates of older versions.
        type CertificateSubject (user: string, uid: int, directories: []string, protection: string, at_rest: ?string)

        # An offline lease granted before the wipe was requested; in_force: still in force then.
        type CertificateLease (until: string, granted_at: string, source: string, reference: string, in_force: bool)

        type CertificateRequest (
          trigger: string,
          reason: string,
          requested_at: string,
          requester: WipeRequester,
          attempt: int,
          lease: ?CertificateLease
        )

        # type: NIST SP 800-88's method type where it applies ("Purge"), else the file-level method.
        type CertificateMethod (
          type: string,
          technique: string,
          description: string,
          cipher: ?string,
          key_bits: ?int,
          passes: ?int,
          pattern: ?string,
          note: ?string
        )

        type CertificateTool (name: string, version: string)

        # check: key-absent, wrapped-key-absent or vault-empty.
        type Verification (check: string, passed: bool, detail: string)

        # A sealed outbox's upload before the wipe: uploaded with the server's receipt
        # (http_status, receipt), or why not (problem).
        type CertificateOutboxCopy (
          name: string,
          sha256: ?string,
          bytes: int,
          uploaded: bool,
          receipt: ?string,
          http_status: ?int,
          problem: ?string
        )

        # What became of the vault's outbox (docs/outbox.md): handling is uploaded, kept,
        # destroyed, not-sealed or empty.
        type CertificateOutbox (handling: string, detail: string, copies: []CertificateOutboxCopy)

        # A record of one wipe attempt, complete or not (NIST SP 800-88 Rev. 1, Appendix G).
        # outbox: absent without [outbox] and in certificates of older versions.
        type Certificate (
          id: string,
          standard: string,
          host: CertificateHost,
          subject: CertificateSubject,
          request: CertificateRequest,
          method: CertificateMethod,
          tool: CertificateTool,
          media: []MediaFacts,
          started: string,
          finished: string,
          result: string,
          exceptions: []Skipped,
          entries_removed: int,
          files_overwritten: int,
          bytes_overwritten: int,
          verification: []Verification,
          caveats: []WipeCaveat,
          outbox: ?CertificateOutbox
        )

        # certificate: on a wipe's result event (kind wipe or wipe-incomplete).
        # uid and registration_id: the registration the event belongs to; absent for one that
        # belongs to none (only administrators see those).
        # requester: the control-socket client that asked for it; absent for what lockwiped
        # did of its own accord and for events recorded before requesters were.
        # repeats, last_time: a run of refusals recorded as one event (time: the first,
        # last_time: the last, detail: the last one's); absent for a single event.
        type Event (
          time: string,
          user: string,
          kind: string,
          trigger: ?string,
          detail: string,
          certificate: ?Certificate,
          uid: ?int,
          registration_id: ?string,
          requester: ?EventRequester,
          repeats: ?int,
          last_time: ?string
        )

        # comm: the client's /proc/PID/comm when it connected (any process may choose it).
        type EventRequester (uid: int, pid: int, comm: ?string)

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

        method GetPolicy() -> (offline_days_before_lock: int, offline_days_before_wipe: int, source: string)

        # limit: the newest that many events (default 1000, at most 10000); 0 returns none.
        # since: only events at or after this time (seconds since the epoch).
        # truncated: true when older events were left out to keep the reply within 4 MiB
        # (the newest are kept); absent otherwise.
        method GetHistory(user: ?string, limit: ?int, since: ?int) -> (events: []Event, truncated: ?bool)

        # The newest certificate of the user's wipes, or the one with id (administrators,
        # and the user whose data it is: the uid of the registration it was made for).
        method GetCertificate(user: string, id: ?string) -> (certificate: Certificate)

        # Exactly one of user or all; an ordinary user naming neither locks her own
        # registration. With preview, nothing is locked: each result lists the processes
        # the lock would end.
        method Lock(user: ?string, all: ?bool, preview: ?bool) -> (results: []ActionResult)

        # An encrypted vault whose key a passcode wraps needs the passcode; an expired
        # passcode must be replaced in the same request (new_passcode).
        method Unlock(user: string, passcode: ?string, new_passcode: ?string) -> (results: []ActionResult)

        # Without current: the first passcode of a vault the machine key wraps; with it: a change.
        method SetPasscode(user: string, current: ?string, new: string) -> (results: []ActionResult)

        # Irreversible. Exactly one of user or all.
        method Wipe(user: ?string, all: ?bool) -> (results: []ActionResult)

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

        # Replaces all credentials of a registration (absent fields are removed).
        method SetCredentials(
          user: string,
          token: ?string,
          client_certificate: ?string,
          client_key: ?string,
          refresh_token: ?string
        ) -> (results: []ActionResult)

        method Unregister(user: string) -> (results: []ActionResult)

        # Without user: every registration (administrators), or the caller's own.
        method CheckIn(user: ?string) -> (results: []ActionResult)

        # A new single-use challenge for the helpdesk (docs/offline-codes.md): to lift the
        # registration's lock, or with extend_days to extend its offline lease. It replaces
        # the registration's previous one. Without user: the caller's own registration.
        method OfflineCodeChallenge(user: ?string, extend_days: ?int) -> (
          user: string,
          challenge: string,
          machine: string,
          request: string
        )

        # The helpdesk's response to the registration's outstanding challenge: does what it
        # asked, once. Wrong responses back off as wrong passcodes do and never wipe.
        method OfflineCodeEnter(user: ?string, code: string) -> (results: []ActionResult)

        # Stores this machine's offline-code key (hex), derived from the fleet secret for
        # machine (its id in the challenges); root-only, never shown or logged.
        method ProvisionOfflineCodes(machine: string, machine_key: string) -> (machine: string, detail: string)

        # The PAM auth stack (lockwipectl pam-auth) hands on the password the user with this
        # uid just logged in with: a server or offline lock a contact made liftable is lifted,
        # an encrypted vault whose passcode is that password opened. Root only; a wrong
        # password never counts toward retry_limit. One result per registration of the uid.
        method LiftAtLogin(uid: int, password: string) -> (results: []ActionResult)

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

        # A vault key (base64) the caller opened from its recovery wrap with the
        # organisation's private key (lockwipectl recover), for the registration with
        # registration_id: checked against the vault's key identifier, then wrapped again,
        # under new_passcode or the machine key (a machine key that cannot be opened is set
        # aside and a new one sealed to the machine as it is now). A vault locked because
        # its key could not be opened at start-up is opened. Administrators only.
        method Recover(user: string, registration_id: string, key: string, new_passcode: ?string) -> (results: []ActionResult)

        error NotPermitted (reason: string)

        error NoSuchRegistration (user: string)

        error NoSuchCertificate (user: string, reason: string)

        error RegistrationRefused (reason: string)

        error ActionFailed (reason: string)

        # The user's vault key is wrapped by their passcode and none was given.
        error PasscodeRequired (user: string, reason: string)

        # The passcode was right but has expired: unlock again with a new one.
        error PasscodeExpired (user: string, reason: string)

        # lockwiped is in its start-up pass (resuming wipes, enforcing the policy for the
        # time it was not running): everything but GetStatus and GetInfo waits for its end.
        error StartingUp (reason: string)

        # lockwiped is stopping and has not acted on the request: ask again (with socket
        # activation the next lockwiped answers it).
        error Stopping (reason: string)

        """

    static let service = """
        # The Varlink Service Interface is provided by every varlink service.
        interface org.varlink.service

        method GetInfo() -> (
          vendor: string,
          product: string,
          version: string,
          url: string,
          interfaces: []string
        )

        method GetInterfaceDescription(interface: string) -> (description: string)

        error InterfaceNotFound (interface: string)

        error MethodNotFound (method: string)

        error MethodNotImplemented (method: string)

        error InvalidParameter (parameter: string)

        error PermissionDenied ()

        error ExpectedMore ()

        """
}
