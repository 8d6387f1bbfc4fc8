/// One reading of the daemon's state as the metrics file shows it (`[metrics] textfile`,
/// docs/fleet.md): what `status` reports, as numbers.
public struct MetricsSnapshot: Sendable, Equatable {
    public struct Registration: Sendable, Equatable {
        public var user: String
        public var uid: UInt32
        /// The registration id (`RegistrationRecord.id`): the only label of its series
        /// when user labels are left out.
        public var id: String
        public var state: RegistrationState
        public var protection: Protection
        public var blocked: Bool
        /// The server is reached but rejects the registration (HTTP 403 without a known
        /// message code, or 401 a refresh did not cure); nil when it does not.
        public var rejectedStatus: Int?
        public var offlineSeconds: Int64
        /// Unix seconds: the last successful contact (or registration / admin unlock).
        public var lastContact: Int64
        /// What the policy does next and in how many seconds of offline time; nil when nothing is due.
        public var next: ScheduledAction?
        /// Check-ins that failed in a row (0 after a contact).
        public var failedCheckIns: Int
        /// The offline lease in force: when it ends (Unix seconds) and who granted it
        /// (`OfflineLease.Source`); nil without one.
        public var leaseEnd: Int64? = nil
        public var leaseSource: String? = nil
        /// What a copy of the disk gets of its vault (`AtRest`); nil once wiped.
        public var atRest: AtRest? = nil

        public init(
            user: String, uid: UInt32, id: String = "", state: RegistrationState, protection: Protection, blocked: Bool, offlineSeconds: Int64,
            lastContact: Int64, next: ScheduledAction?, failedCheckIns: Int, rejectedStatus: Int? = nil
        ) {
            self.rejectedStatus = rejectedStatus
            self.user = user
            self.uid = uid
            self.id = id
            self.state = state
            self.protection = protection
            self.blocked = blocked
            self.offlineSeconds = offlineSeconds
            self.lastContact = lastContact
            self.next = next
            self.failedCheckIns = failedCheckIns
        }
    }

    public var version: String
    /// Unix seconds: when this reading was taken, which is when the file is written.
    public var writtenAt: Int64
    /// The state database is damaged: nothing is enforced (and no registration is known).
    public var degraded: Bool
    /// The machine key exists and cannot be opened: its vaults stay locked.
    public var machineKeyUnavailable = false
    /// Wipes that finished, complete or incomplete, as history counts them.
    public var wipesComplete: Int
    public var wipesIncomplete: Int
    public var registrations: [Registration]

    public init(version: String, writtenAt: Int64, degraded: Bool, wipesComplete: Int, wipesIncomplete: Int, registrations: [Registration]) {
        self.version = version
        self.writtenAt = writtenAt
        self.degraded = degraded
        self.wipesComplete = wipesComplete
        self.wipesIncomplete = wipesIncomplete
        self.registrations = registrations
    }
}

/// The Prometheus text exposition format, version 0.0.4
/// (https://prometheus.io/docs/instrumenting/exposition_formats/), as node_exporter's
/// textfile collector reads it: a `# HELP` and a `# TYPE` line per metric, then its
/// samples, one group per metric; label values escaped; every line ends in a line feed.
/// Metric names follow https://prometheus.io/docs/practices/naming/ (an application
/// prefix, base units in the name, `_total` for counters, `_info` for metadata).
///
/// The order is fixed (metrics as listed here, registrations by user name then uid,
/// states in their declared order) so that two readings of the same state are the same
/// text. A metric without samples (no registration, nothing due) is left out whole.
///
/// Without user labels (`[metrics] user_labels = false`) every per-registration series
/// carries the one label `registration` (the registration id) instead of `user` and
/// `uid`, and registrations are ordered by it: nothing in the file names an account.
public enum MetricsExposition {
    public static func render(_ snapshot: MetricsSnapshot, userLabels: Bool = true) -> String {
        var out = ""
        func family(_ name: String, _ type: String, _ help: String, _ samples: [(labels: [(String, String)], value: String)]) {
            guard !samples.isEmpty else { return }
            out += "# HELP \(name) \(escapeHelp(help))\n# TYPE \(name) \(type)\n"
            for sample in samples {
                out += name
                if !sample.labels.isEmpty {
                    out += "{" + sample.labels.map { "\($0.0)=\"\(escapeLabelValue($0.1))\"" }.joined(separator: ",") + "}"
                }
                out += " \(sample.value)\n"
            }
        }
        func flag(_ b: Bool) -> String { b ? "1" : "0" }

        family("lockwipe_build_info", "gauge", "The running lockwiped's version (always 1).", [([("version", snapshot.version)], "1")])
        family(
            "lockwipe_metrics_last_write_timestamp_seconds", "gauge",
            "When lockwiped wrote this file (Unix seconds); it is rewritten at every change and at least every check-in interval.",
            [([], "\(snapshot.writtenAt)")])
        family(
            "lockwipe_degraded", "gauge", "1 when the state database is damaged and nothing is enforced (lockwipectl status says why).",
            [([], flag(snapshot.degraded))])
        family(
            "lockwipe_machine_key_unavailable", "gauge",
            "1 when lockwiped's sealed machine key does not open (a PCR changed, the TPM was cleared): the encrypted vaults it wraps stay locked.",
            [([], flag(snapshot.machineKeyUnavailable))])
        family(
            "lockwipe_wipes_total", "counter", "Wipes that finished, by result (complete, or incomplete with exceptions), as the history records them.",
            [([("result", "complete")], "\(snapshot.wipesComplete)"), ([("result", "incomplete")], "\(snapshot.wipesIncomplete)")])

        let registrations =
            userLabels
            ? snapshot.registrations.sorted { ($0.user, $0.uid) < ($1.user, $1.uid) } : snapshot.registrations.sorted { $0.id < $1.id }
        func identity(_ r: MetricsSnapshot.Registration) -> [(String, String)] {
            userLabels ? [("user", r.user), ("uid", "\(r.uid)")] : [("registration", r.id)]
        }
        func each(_ extra: (MetricsSnapshot.Registration) -> [(labels: [(String, String)], value: String)]) -> [(labels: [(String, String)], value: String)] {
            registrations.flatMap { r in extra(r).map { (identity(r) + $0.labels, $0.value) } }
        }
        family("lockwipe_registration_info", "gauge", "A registration and how its vault is protected (always 1).", each { [([("protection", $0.protection.rawValue)], "1")] })
        family(
            "lockwipe_registration_at_rest", "gauge",
            "What a copy of the disk gets of the vault (always 1): at_rest is tpm2 (nothing), host or disk (the vault), passcode (offline guessing) or none (a permission vault); absent once wiped.",
            each { r in r.atRest.map { [([("at_rest", $0.rawValue)], "1")] } ?? [] })
        family(
            "lockwipe_registration_state", "gauge", "1 for the state a registration is in, 0 for the others.",
            each { r in RegistrationState.allCases.map { ([("state", $0.rawValue)], flag(r.state == $0)) } })
        family("lockwipe_registration_blocked", "gauge", "1 while the policy server blocks the registration.", each { [([], flag($0.blocked))] })
        family(
            "lockwipe_registration_rejected", "gauge",
            "1 while the policy server is reached but rejects the registration (HTTP 403 without a known message code, or 401); not a contact.",
            each { [([], flag($0.rejectedStatus != nil))] })
        family(
            "lockwipe_registration_offline_seconds", "gauge", "Offline time as the policy counts it (seconds since the last contact, suspend included).",
            each { [([], "\($0.offlineSeconds)")] })
        family(
            "lockwipe_registration_last_contact_timestamp_seconds", "gauge",
            "The last successful contact with the policy server, registration or administrator unlock (Unix seconds).",
            each { [([], "\($0.lastContact)")] })
        family(
            "lockwipe_registration_next_action_seconds", "gauge", "Offline seconds left until the policy's next action (lock or wipe); absent when nothing is due.",
            each { r in r.next.map { [([("action", $0.action.rawValue)], "\($0.inSeconds)")] } ?? [] })
        family(
            "lockwipe_registration_check_in_failures", "gauge", "Check-ins that failed in a row (0 after a successful contact).",
            each { [([], "\($0.failedCheckIns)")] })
        family(
            "lockwipe_registration_offline_lease_end_timestamp_seconds", "gauge",
            "When the offline lease in force ends (Unix seconds): until then the offline policy neither locks nor wipes; `source` is offline-code or server; absent without a lease in force.",
            each { r in r.leaseEnd.map { [([("source", r.leaseSource ?? "")], "\($0)")] } ?? [] })
        return out
    }

    /// A label value as the format quotes it: backslash, double quote and line feed
    /// escaped as `\\`, `\"` and `\n`; everything else (UTF-8) as it is.
    public static func escapeLabelValue(_ value: String) -> String {
        var out = ""
        for c in value.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// HELP text: backslash and line feed escaped (a double quote stays as it is).
    static func escapeHelp(_ text: String) -> String {
        var out = ""
        for c in text.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
