/// The varlink interface definitions served by `GetInterfaceDescription`, assembled from
/// the method declarations (`ManagerMethods`, `ServiceMethods`) between the interface's
/// header, its shared types and its errors.
public enum InterfaceDescription {
    public static let managerName = "io.lockwipe.Manager"
    public static let serviceName = "org.varlink.service"

    public static let manager = assemble(managerHeader, managerTypes, ManagerMethods.all, managerErrors)
    public static let service = assemble(serviceHeader, nil, ServiceMethods.all, serviceErrors)

    /// The blocks of an interface, one blank line between them, the text ending in a newline.
    static func assemble(_ header: String, _ types: String?, _ methods: [any VarlinkMethodDeclaration], _ errors: String) -> String {
        ([header] + (types.map { [$0] } ?? []) + methods.map(\.definition) + [errors]).joined(separator: "\n\n") + "\n"
    }

    static let managerHeader = """
        # Lock and wipe of registered users' data on a shared machine (lockwiped).
        interface io.lockwipe.Manager
        """

    /// The types the methods share (a type only one method uses is declared with it).
    static let managerTypes = """
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
        """

    static let managerErrors = """
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

    static let serviceHeader = """
        # The Varlink Service Interface is provided by every varlink service.
        interface org.varlink.service
        """

    static let serviceErrors = """
        error InterfaceNotFound (interface: string)

        error MethodNotFound (method: string)

        error MethodNotImplemented (method: string)

        error InvalidParameter (parameter: string)

        error PermissionDenied ()

        error ExpectedMore ()
        """
}
