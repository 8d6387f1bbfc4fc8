import Foundation
import LockwipeCheckIn
import LockwipeCore
import LockwipeMetrics
import LockwipeWipe
import TOMLKit

/// The daemon's typed configuration (`lockwiped.toml` plus drop-ins). Every field has the
/// default documented in lockwiped.toml(5), so a machine without a config file runs with
/// "never lock, never wipe".
public struct Configuration: Sendable, Equatable {
    public var policy: Policy = .never
    /// End the user's processes that hold files open under the vault before locking.
    public var terminateProcesses = true
    /// Seconds between SIGTERM and SIGKILL for those processes.
    public var terminateGraceSeconds = 5
    /// What a contact with the policy server does to a lock it or the offline policy set
    /// (`[lock] lift_after_contact`, `PolicyLockLift`): the lock becomes liftable and is
    /// lifted at its user's next login (the default), or the contact lifts it.
    public var liftAfterContact = PolicyLockLift.Setting.atLogin
    /// Seconds a hook may run before it is sent SIGTERM (then SIGKILL).
    public var hookTimeoutSeconds = 30
    /// Warn (observers, hooks, journal, login gate, status) this many seconds before an
    /// offline-triggered lock or wipe is due (`[notify] warn_before`); 0: never warn.
    public var warnBeforeSeconds = 172_800
    /// Members of this group may do everything root may. A group that does not exist grants nothing.
    public var adminGroup = "lockwipe"
    public var maxConnections = 64
    public var maxMessageBytes = 65_536
    public var idleTimeoutSeconds = 60
    /// How a wipe erases (`[wipe]`).
    public var wipe = WipeOptions()
    /// The policy server (`[server]`); no `url` means no server.
    public var server = ServerConfiguration()
    /// The passcode policy of encrypted vaults (`[passcode]`); the server's replaces it rule by rule.
    public var passcode = PasscodePolicy()
    /// Directories inside the guarded areas (`DirectoryRules.guardedAreas`: /opt, /root,
    /// /var/lib, ...) where vaults may be registered (`[vault] allow_under`), normalized.
    public var vaultAllowedUnder: [String] = []
    /// Refuse permission vaults: every registration must be encrypted, as with
    /// `register --require-encryption` (`[vault] require_encryption`).
    public var vaultRequireEncryption = false
    /// Where the Prometheus metrics are written for node_exporter's textfile collector
    /// (`[metrics] textfile`, an absolute path ending in `.prom`); nil: no metrics.
    public var metricsTextfile: String?
    /// Who may read the metrics file (`[metrics] mode`, `group`, `user_labels`).
    public var metrics = MetricsFileOptions()
    /// Offline leases (`[offline_codes]`): how long the lease that comes with a lock an
    /// offline code lifted lasts, and the longest lease an offline code or the server may grant.
    public var offlineCodes = OfflineCodesConfiguration()
    /// How lockwiped's own secrets are sealed (`[keys]`: seal, tpm2_device, tpm2_pcrs).
    /// Read at start: a reload does not seal them again.
    public var keys = CredentialSealer()
    /// The organisation's recovery key (`[keys] recovery_public_key`): every vault key is
    /// also sealed to it. Read at start, as the rest of `[keys]`.
    public var recoveryPublicKey: RecoveryPublicKey?
    /// The outbox of every vault (`[outbox]`): sealed to the organisation before a lock or
    /// wipe (docs/outbox.md).
    public var outbox = OutboxConfiguration()

    /// Whom outboxes are sealed to: `[outbox] recipient_public_key`, else the recovery key.
    public var outboxRecipient: RecoveryPublicKey? { outbox.recipient ?? recoveryPublicKey }

    public init() {}
}

/// One thing wrong in a configuration file, named so an operator can fix it:
/// `FILE:LINE: KEY: message`.
public struct ConfigurationProblem: Error, Sendable, Equatable, CustomStringConvertible {
    public var file: String
    public var line: Int?
    public var key: String
    public var message: String

    public var description: String {
        let place = line.map { "\(file):\($0)" } ?? file
        return key.isEmpty ? "\(place): \(message)" : "\(place): \(key): \(message)"
    }
}

/// Every problem found in the configuration; nothing of it is applied.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public var problems: [ConfigurationProblem]
    public init(problems: [ConfigurationProblem]) { self.problems = problems }
    public var description: String { problems.map(\.description).joined(separator: "\n") }
}

/// Reads `lockwiped.toml` and then `lockwiped.toml.d/*.toml` in lexical order (later wins),
/// collecting every problem instead of stopping at the first, like `sshd -t`.
public enum ConfigurationLoader {
    public struct Loaded: Sendable {
        public var configuration: Configuration
        /// Files read, in order.
        public var files: [String]
        /// Things worth telling the operator that are not errors (e.g. no config file).
        public var notices: [String]
        /// What is wrong with the machine rather than the file (the metrics directory is
        /// missing or not writable): `--check-config` reports these and fails; the daemon
        /// logs them and runs, since enforcement never waits for monitoring.
        public var machineProblems: [ConfigurationProblem] = []
    }

    private typealias Key = ConfigurationKey

    /// The keys of `lockwiped.toml` but `[server.oauth]` (`ConfigurationLoader+OAuth.swift`):
    /// each with the reader of its kind and where its value, read as that kind, goes.
    private static let keys: [Key] = [
        Key(table: "policy", name: "offline_days_before_lock", .nonNegativeInt) { $0.policy.offlineDaysBeforeLock = $1 },
        Key(table: "policy", name: "offline_days_before_wipe", .nonNegativeInt) { $0.policy.offlineDaysBeforeWipe = $1 },
        Key(table: "lock", name: "terminate_processes", .bool) { $0.terminateProcesses = $1 },
        Key(table: "lock", name: "terminate_grace_seconds", .nonNegativeInt) { $0.terminateGraceSeconds = $1 },
        Key(table: "lock", name: "lift_after_contact", .liftAfterContact) { $0.liftAfterContact = $1 },
        Key(table: "hooks", name: "timeout_seconds", .positiveInt) { $0.hookTimeoutSeconds = $1 },
        Key(table: "notify", name: "warn_before", .nonNegativeInt) { $0.warnBeforeSeconds = $1 },
        Key(table: "control", name: "admin_group", .groupName) { $0.adminGroup = $1 },
        Key(table: "control", name: "max_connections", .positiveInt) { $0.maxConnections = $1 },
        Key(table: "control", name: "max_message_bytes", .positiveInt) { $0.maxMessageBytes = $1 },
        Key(table: "control", name: "idle_timeout_seconds", .positiveInt) { $0.idleTimeoutSeconds = $1 },
        Key(table: "wipe", name: "passes", .passes) { $0.wipe.passes = $1 },
        Key(table: "wipe", name: "pattern", .pattern) { $0.wipe.pattern = $1 },
        Key(table: "wipe", name: "remove_root", .bool) { $0.wipe.removeRoot = $1 },
        Key(table: "server", name: "url", .serverURL) { $0.server.url = $1 },
        Key(table: "server", name: "interval", .positiveInt) { $0.server.intervalSeconds = $1 },
        Key(table: "server", name: "timeout", .positiveInt) { $0.server.timeoutSeconds = $1 },
        Key(table: "server", name: "ca_file", .readableFile) { $0.server.caFile = $1 },
        Key(table: "server", name: "allow_insecure_http", .bool) { $0.server.allowInsecureHTTP = $1 },
        Key(table: "server", name: "protocol", .serverProtocol) { $0.server.serverProtocol = $1 },
        Key(table: "server", name: "application_id", .headerValue) { $0.server.applicationID = $1 },
        Key(table: "server", name: "device_id", .headerValue) { $0.server.deviceID = $1 },
        Key(table: "server", name: "application_version", .headerValue) { $0.server.applicationVersion = $1 },
        Key(table: "passcode", name: "min_length", .nonNegativeInt) { $0.passcode.minLength = $1 },
        Key(table: "passcode", name: "requires_digit", .bool) { $0.passcode.requiresDigit = $1 },
        Key(table: "passcode", name: "requires_lower", .bool) { $0.passcode.requiresLower = $1 },
        Key(table: "passcode", name: "requires_upper", .bool) { $0.passcode.requiresUpper = $1 },
        Key(table: "passcode", name: "requires_special", .bool) { $0.passcode.requiresSpecial = $1 },
        Key(table: "passcode", name: "min_unique_chars", .nonNegativeInt) { $0.passcode.minUniqueChars = $1 },
        Key(table: "passcode", name: "min_character_classes", .characterClasses) { $0.passcode.minCharacterClasses = $1 },
        Key(table: "passcode", name: "expiration_days", .nonNegativeInt) { $0.passcode.expirationDays = $1 },
        Key(table: "passcode", name: "retry_limit", .nonNegativeInt) { $0.passcode.retryLimit = $1 },
        Key(table: "passcode", name: "lock_timeout", .nonNegativeInt) { $0.passcode.lockTimeout = $1 },
        Key(table: "passcode", name: "default_password_allowed", .bool) { $0.passcode.defaultPasswordAllowed = $1 },
        Key(table: "vault", name: "allow_under", .vaultAllowances) { $0.vaultAllowedUnder = $1 },
        Key(table: "vault", name: "require_encryption", .bool) { $0.vaultRequireEncryption = $1 },
        Key(table: "metrics", name: "textfile", .metricsTextfile) { $0.metricsTextfile = $1 },
        Key(table: "metrics", name: "mode", .fileMode) { $0.metrics.mode = $1 },
        Key(table: "metrics", name: "group", .groupName) { $0.metrics.group = $1 },
        Key(table: "metrics", name: "user_labels", .bool) { $0.metrics.userLabels = $1 },
        Key(table: "offline_codes", name: "unlock_lease_days", .nonNegativeInt) { $0.offlineCodes.unlockLeaseDays = $1 },
        Key(table: "offline_codes", name: "max_lease_days", .positiveInt) { $0.offlineCodes.maxLeaseDays = $1 },
        Key(table: "keys", name: "seal", .sealSetting) { $0.keys.setting = $1 },
        Key(table: "keys", name: "tpm2_device", .tpm2Device) { $0.keys.tpm2Device = $1 },
        Key(table: "keys", name: "tpm2_pcrs", .tpm2PCRs) { $0.keys.tpm2PCRs = $1 },
        Key(table: "keys", name: "recovery_public_key", .recoveryPublicKey) { $0.recoveryPublicKey = $1 },
        Key(table: "outbox", name: "directory", .outboxDirectory) { $0.outbox.directory = $1 },
        Key(table: "outbox", name: "recipient_public_key", .recoveryPublicKey) { $0.outbox.recipient = $1 },
        Key(table: "outbox", name: "max_bytes", .positiveInt) { $0.outbox.maxBytes = $1 },
        Key(table: "outbox", name: "max_files", .positiveInt) { $0.outbox.maxFiles = $1 },
        Key(table: "outbox", name: "upload_wait_seconds", .nonNegativeInt) { $0.outbox.uploadWaitSeconds = $1 },
        Key(table: "outbox", name: "offline_wipe", .offlineWipe) { $0.outbox.offlineWipe = $1 },
    ]

    /// The drop-in directory that belongs to `path`.
    public static func dropInDirectory(for path: String) -> String { path + ".d" }

    /// Where the SAP device id is derived from when `[server] device_id` is not set.
    public static let machineIDPath = "/etc/machine-id"

    /// `named`: the file was named explicitly (`--config`): then it must exist. Only the
    /// default path may be missing, which means the defaults.
    public static func load(
        path: String, named: Bool = false, machineIDPath: String = ConfigurationLoader.machineIDPath
    ) throws(ConfigurationError)
        -> Loaded
    {
        var files: [String] = []
        var notices: [String] = []
        var st = stat()
        if lstat(path, &st) == 0 || errno != ENOENT {
            files.append(path)  // whatever it is: reading it says what is wrong with it
        } else if named {
            throw ConfigurationError(problems: [
                ConfigurationProblem(
                    file: path, line: nil, key: "",
                    message: "no such file (it was named with --config; only the default \(DaemonPaths.defaultConfig) may be missing, which means the defaults)")
            ])
        } else {
            notices.append("no configuration file at \(path); using defaults (never lock, never wipe)")
        }
        let dropIns = dropInDirectory(for: path)
        if let names = try? FileManager.default.contentsOfDirectory(atPath: dropIns) {
            files += names.filter { $0.hasSuffix(".toml") && !$0.hasPrefix(".") }.sorted().map { dropIns + "/" + $0 }
        }

        var configuration = Configuration()
        var problems: [ConfigurationProblem] = []
        var lastSetIn: [String: (file: String, line: Int?)] = [:]
        var oauth: OAuthDraft?
        for file in files {
            problems += apply(file: file, to: &configuration, lastSetIn: &lastSetIn, oauth: &oauth)
        }
        let (oauthConfiguration, oauthFound) = oauthProblems(oauth, server: configuration.server, lastSetIn: lastSetIn, fallbackFile: files.last ?? path)
        configuration.server.oauth = oauthConfiguration
        if configuration.server.serverProtocol == .sapMobileServices { configuration.server.oauth?.applicationVersion = configuration.server.applicationVersion }
        problems += oauthFound
        for (key, message) in configuration.policy.problems {
            let place = lastSetIn["policy." + key] ?? (files.last ?? path, nil)
            problems.append(ConfigurationProblem(file: place.file, line: place.line, key: "policy." + key, message: message))
        }
        for (key, message) in configuration.offlineCodes.problems {
            let place = lastSetIn["offline_codes." + key] ?? lastSetIn["offline_codes.max_lease_days"] ?? (files.last ?? path, nil)
            problems.append(ConfigurationProblem(file: place.file, line: place.line, key: "offline_codes." + key, message: message))
        }
        if let url = configuration.server.url, ServerURL.isPlainHTTP(url), !configuration.server.allowInsecureHTTP {
            let place = lastSetIn["server.url"] ?? (files.last ?? path, nil)
            problems.append(
                ConfigurationProblem(
                    file: place.file, line: place.line, key: "server.url",
                    message: "plain http:// needs allow_insecure_http = true in [server]: any local user who binds that port "
                        + "first receives every registration's token and can order locks and wipes; use https:// "
                        + "(with ca_file for a private CA)"))
        }
        if configuration.outbox.directory != nil, configuration.outboxRecipient == nil {
            let place = lastSetIn["outbox.directory"] ?? (files.last ?? path, nil)
            problems.append(
                ConfigurationProblem(
                    file: place.file, line: place.line, key: "outbox.directory",
                    message: "an outbox is sealed to the organisation: set [outbox] recipient_public_key or [keys] recovery_public_key "
                        + "(lockwipectl recovery-key new prints one)"))
        }
        let reported = Set(problems.map(\.key))
        problems += completeSAP(&configuration.server, lastSetIn: lastSetIn, files: files, path: path, machineIDPath: machineIDPath)
            .filter { !reported.contains($0.key) }
        guard problems.isEmpty else { throw ConfigurationError(problems: ordered(problems, files: files)) }
        var machineProblems: [ConfigurationProblem] = []
        if let textfile = configuration.metricsTextfile, let message = MetricsTextfile.directoryProblem(textfile) {
            let place = lastSetIn["metrics.textfile"] ?? (files.last ?? path, nil)
            machineProblems.append(ConfigurationProblem(file: place.file, line: place.line, key: "metrics.textfile", message: message))
        }
        if configuration.metricsTextfile != nil, let group = configuration.metrics.group, MetricsTextfile.groupID(group) == nil {
            let place = lastSetIn["metrics.group"] ?? (files.last ?? path, nil)
            machineProblems.append(
                ConfigurationProblem(
                    file: place.file, line: place.line, key: "metrics.group",
                    message: "the group \"\(group)\" does not exist; the metrics file is not written until it does (never readable by everyone instead)"))
        }
        return Loaded(configuration: configuration, files: files, notices: notices, machineProblems: machineProblems)
    }

    /// Problems by file, in the order the files are read (the main file, then the drop-ins
    /// in lexical order; any other file after them, by name), then by line; a problem
    /// without a line comes after the file's lined ones. Otherwise in the order found.
    static func ordered(_ problems: [ConfigurationProblem], files: [String]) -> [ConfigurationProblem] {
        let rank = Dictionary(files.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        return problems.enumerated().sorted { a, b in
            let (x, y) = (a.element, b.element)
            let (fx, fy) = (rank[x.file] ?? files.count, rank[y.file] ?? files.count)
            if fx != fy { return fx < fy }
            if x.file != y.file { return x.file < y.file }
            let (lx, ly) = (x.line ?? Int.max, y.line ?? Int.max)
            if lx != ly { return lx < ly }
            return a.offset < b.offset
        }.map(\.element)
    }

    /// The text of a configuration file, or what is wrong with it in the operator's words.
    static func readText(_ file: String) -> Result<String, ConfigurationProblem> {
        func problem(_ message: String) -> Result<String, ConfigurationProblem> {
            .failure(ConfigurationProblem(file: file, line: nil, key: "", message: message))
        }
        let fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return problem("cannot be opened: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { return problem("cannot be read: \(String(cString: strerror(errno)))") }
        switch st.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: return problem("is a directory, not a configuration file")
        default: return problem("is not a regular file")
        }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return problem("cannot be read: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            bytes += buffer[0..<n]
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { return problem("is not UTF-8 text") }
        return .success(text)
    }

    /// `sap-mobile-services` needs `application_id`; its device id, when not set, is derived
    /// from the machine id (never the machine id itself).
    private static func completeSAP(
        _ server: inout ServerConfiguration, lastSetIn: [String: (file: String, line: Int?)], files: [String], path: String, machineIDPath: String
    ) -> [ConfigurationProblem] {
        guard server.serverProtocol == .sapMobileServices else { return [] }
        let place = lastSetIn["server.protocol"] ?? (files.last ?? path, nil)
        var problems: [ConfigurationProblem] = []
        if server.applicationID == nil {
            problems.append(
                ConfigurationProblem(
                    file: place.file, line: place.line, key: "server.application_id",
                    message: "protocol = \"sap-mobile-services\" needs application_id in [server] (the app id of the Mobile Services cockpit)"))
        }
        if server.deviceID == nil {
            do {
                server.deviceID = try DeviceID.fromMachineID(file: machineIDPath)
            } catch {
                problems.append(
                    ConfigurationProblem(
                        file: place.file, line: place.line, key: "server.device_id",
                        message: "not set, and it cannot be derived from \(machineIDPath): \(error); set device_id in [server]"))
            }
        }
        return problems
    }

    private static func apply(
        file: String, to configuration: inout Configuration, lastSetIn: inout [String: (file: String, line: Int?)], oauth: inout OAuthDraft?
    ) -> [ConfigurationProblem] {
        let text: String
        switch readText(file) {
        case .success(let read): text = read
        case .failure(let problem): return [problem]
        }
        let root: TOMLTable
        do {
            root = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            return [ConfigurationProblem(file: file, line: error.source.begin.line, key: "", message: "not valid TOML: \(error.description)")]
        } catch {
            return [ConfigurationProblem(file: file, line: nil, key: "", message: "not valid TOML: \(error)")]
        }

        var problems: [ConfigurationProblem] = []
        let knownTables = Set(keys.map(\.table))
        for (tableName, tableValue) in root {
            guard knownTables.contains(tableName) else {
                problems.append(
                    ConfigurationProblem(
                        file: file, line: lineOf(table: tableName, key: nil, in: text), key: tableName,
                        message: "unknown table; known tables are \(knownTables.sorted().map { "[\($0)]" }.joined(separator: ", "))"))
                continue
            }
            guard let table = tableValue.tomlValue.table else {
                problems.append(
                    ConfigurationProblem(
                        file: file, line: lineOf(table: nil, key: tableName, in: text), key: tableName,
                        message: "must be a table ([\(tableName)]), not \(tableValue.tomlValue.type.withArticle)"))
                continue
            }
            for (name, value) in table {
                let fullKey = "\(tableName).\(name)"
                let line = lineOf(table: tableName, key: name, in: text)
                if fullKey == "server.oauth" {
                    problems += applyOAuth(value.tomlValue, file: file, text: text, to: &oauth, lastSetIn: &lastSetIn)
                    continue
                }
                guard let key = keys.first(where: { $0.table == tableName && $0.name == name }) else {
                    let known = keys.filter { $0.table == tableName }.map(\.name).joined(separator: ", ")
                    problems.append(ConfigurationProblem(file: file, line: line, key: fullKey, message: "unknown key; [\(tableName)] knows \(known)"))
                    continue
                }
                if let message = key.apply(&configuration, value.tomlValue) {
                    problems.append(ConfigurationProblem(file: file, line: line, key: fullKey, message: message))
                    continue
                }
                lastSetIn[fullKey] = (file, line)
            }
        }
        return problems
    }

    /// The line (1-based) where `key` is assigned in `[table]`, found by reading the text,
    /// since the TOML library reports positions only for syntax errors.
    static func lineOf(table: String?, key: String?, in text: String) -> Int? {
        var current: String? = nil
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("[") {
                current = line.trimmingCharacters(in: CharacterSet(charactersIn: "[] \t"))
                if key == nil, current == table { return index + 1 }
                continue
            }
            guard let key, current == table || (table == nil && current == nil) else { continue }
            let name = line.split(separator: "=", maxSplits: 1).first?.trimmingCharacters(in: CharacterSet(charactersIn: " \t\"'"))
            if name == key { return index + 1 }
        }
        return nil
    }
}

extension TOMLType {
    /// The type's name with its article, for "must be X, not an integer".
    var withArticle: String {
        let name = description
        return ("aeiou".contains(name.first ?? "x") ? "an " : "a ") + name
    }
}
