import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeSystemd
import Logging
import Subprocess

#if canImport(System)
    import System
#else
    import SystemPackage
#endif

/// The `hooks.d` observer: runs every executable in the hooks directory, in lexical order,
/// with the event as arguments (`<event> <user>`) and `LOCKWIPE_*` environment; the
/// directories both newline-separated (`LOCKWIPE_DIRECTORIES`: unambiguous, since a path
/// with a control character is refused at registration) and one per variable
/// (`LOCKWIPE_DIRECTORY_COUNT`, `LOCKWIPE_DIRECTORY_1` ...).
///
/// A hook gets `timeout` to finish; then its whole process group gets SIGTERM and, two
/// seconds later, SIGKILL. Its output goes to the journal. A hook's failure is logged and
/// never stops the action: enforcement always happens.
public struct HookRunner: LockAndWipeEventObserving {
    public let directory: String
    public let timeout: Duration
    private let logger: Logger

    public init(directory: String, timeout: Duration, logger: Logger) {
        self.directory = directory
        self.timeout = timeout
        self.logger = logger
    }

    public func willLock(_ event: LockWipeEvent) async { await run(.willLock, event) }
    public func didLock(_ event: LockWipeEvent) async { await run(.didLock, event) }
    public func willWipe(_ event: LockWipeEvent) async { await run(.willWipe, event) }
    public func didWipe(_ event: LockWipeEvent) async { await run(.didWipe, event) }
    public func warnLock(_ event: LockWipeEvent) async { await run(.warnLock, event) }
    public func warnWipe(_ event: LockWipeEvent) async { await run(.warnWipe, event) }
    public func warnRejected(_ event: LockWipeEvent) async { await run(.warnRejected, event) }

    /// A hook that was not run, and why.
    public struct Refusal: Sendable, Equatable {
        public var path: String
        public var reason: String
    }

    /// Executables in `directory` named as run-parts(8) accepts ([A-Za-z0-9_-]+), sorted,
    /// and those refused because someone other than the daemon's own user could change
    /// them: hooks run as root, so a hook, or a hooks directory, that another user can
    /// write, or a symlink that could point anywhere, would hand that user root. A hooks
    /// directory that fails the rule refuses every hook in it.
    public static func scan(_ directory: String, owner: uid_t = geteuid()) -> (hooks: [String], refused: [Refusal]) {
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard dirFD >= 0 else { return ([], []) }  // no hooks directory: no hooks
        defer { close(dirFD) }
        var dirStat = stat()
        guard fstat(dirFD, &dirStat) == 0 else { return ([], []) }
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd/\(dirFD)")) ?? []).sorted().filter { name in
            !name.isEmpty && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }
        }
        var hooks: [String] = []
        var refused: [Refusal] = []
        let directoryProblem = HookSafety.problem(owner: dirStat.st_uid, mode: UInt32(dirStat.st_mode), expectedOwner: owner, isDirectory: true)
        for name in names {
            let path = directory + "/" + name
            var st = stat()
            guard fstatat(dirFD, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            let type = st.st_mode & S_IFMT
            // Not a candidate at all (as run-parts skips them): directories, FIFOs, non-executables.
            if type != S_IFREG && type != S_IFLNK { continue }
            if type == S_IFREG && st.st_mode & 0o111 == 0 { continue }
            if let directoryProblem {
                refused.append(Refusal(path: path, reason: "the hooks directory \(directory) \(directoryProblem)"))
            } else if let problem = HookSafety.problem(owner: st.st_uid, mode: UInt32(st.st_mode), expectedOwner: owner, isDirectory: false) {
                refused.append(Refusal(path: path, reason: problem))
            } else {
                hooks.append(path)
            }
        }
        return (hooks, refused)
    }

    public static func environment(_ callback: ObserverCallback, _ event: LockWipeEvent) -> [String: String] {
        var env = [
            "LOCKWIPE_EVENT": callback.rawValue,
            "LOCKWIPE_ACTION": event.action.rawValue,
            "LOCKWIPE_USER": event.user,
            "LOCKWIPE_UID": String(event.uid),
            "LOCKWIPE_REASON": event.reason,
            "LOCKWIPE_TRIGGER": event.trigger.rawValue,
            "LOCKWIPE_DIRECTORIES": event.directories.joined(separator: "\n"),
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ]
        // One variable per directory as well: exact whatever a path holds (a registration
        // made before control characters were refused may have a newline in one).
        env["LOCKWIPE_DIRECTORY_COUNT"] = String(event.directories.count)
        for (i, directory) in event.directories.enumerated() { env["LOCKWIPE_DIRECTORY_\(i + 1)"] = directory }
        if !event.outboxDirectories.isEmpty {
            // Where the applications put what they have not yet uploaded (docs/outbox.md).
            env["LOCKWIPE_OUTBOX"] = event.outboxDirectories.joined(separator: "\n")
        }
        if let outbox = event.outbox { env["LOCKWIPE_OUTBOX_SEALED"] = outbox }
        if let due = event.dueAt {
            // Warnings: when the action is due, as Unix seconds and ISO 8601 (UTC); for
            // warnRejected, when the policy's next action is due if no contact comes first.
            env["LOCKWIPE_DUE"] = String(due)
            env["LOCKWIPE_DUE_ISO"] = Timestamp.iso(due)
        }
        return env
    }

    func run(_ callback: ObserverCallback, _ event: LockWipeEvent) async {
        let (hooks, refused) = Self.scan(directory)
        for r in refused {
            logger.error(
                "hook refused, not run: \(r.reason)",
                metadata: [
                    "hook": .string(r.path), "event": .string(callback.rawValue), "user": .string(event.user),
                    "message_id": MessageID.hookFailed.metadata,
                ])
        }
        for hook in hooks {
            await runOne(hook, callback, event)
        }
    }

    private func runOne(_ hook: String, _ callback: ObserverCallback, _ event: LockWipeEvent) async {
        var meta: Logger.Metadata = [
            "hook": .string(hook), "event": .string(callback.rawValue), "user": .string(event.user),
        ]
        // What `journalctl -u lockwiped` shows is the message: it names the hook, its event
        // and its end, and each line of its output follows as an entry of its own.
        let named = "hook \(FilePath(hook).lastComponent?.string ?? hook) (\(callback.rawValue) \(event.user))"
        var options = PlatformOptions()
        options.createSession = true  // its own process group, so the teardown reaches its children
        options.teardownSequence = [.gracefulShutDown(toProcessGroup: true, allowedDurationToNextStep: .seconds(2))]
        let platformOptions = options
        let env = Environment.Key.dictionary(Self.environment(callback, event))
        let started = ContinuousClock.now
        let limit = timeout
        do {
            let outcome = try await withThrowingTaskGroup(of: ExecutionRecord?.self) { group in
                group.addTask {
                    let result = try await Subprocess.run(
                        .path(FilePath(hook)),
                        arguments: [callback.rawValue, event.user],
                        environment: .custom(env),
                        platformOptions: platformOptions,
                        output: .string(limit: 1 << 20),
                        error: .string(limit: 1 << 20))
                    return ExecutionRecord(
                        status: Self.words(result.terminationStatus), success: result.terminationStatus.isSuccess,
                        output: result.standardOutput + result.standardError)
                }
                group.addTask {
                    try await Task.sleep(for: limit)
                    return nil
                }
                let first = try await group.next() ?? nil
                group.cancelAll()
                return first
            }
            meta["elapsed_usec"] = .string(JournalFields.microseconds(ContinuousClock.now - started))
            guard let outcome else {
                meta["message_id"] = MessageID.hookFailed.metadata
                logger.error("\(named) timed out after \(limit) and was terminated; the action goes ahead", metadata: meta)
                return
            }
            let output = outcome.output.trimmingCharacters(in: .whitespacesAndNewlines)
            if !output.isEmpty { meta["hook_output"] = .string(output) }
            meta["hook_status"] = .string(outcome.status)
            if outcome.success {
                logger.info("\(named) finished: \(outcome.status)", metadata: meta)
            } else {
                meta["message_id"] = MessageID.hookFailed.metadata
                logger.warning("\(named) failed with \(outcome.status); the action goes ahead", metadata: meta)
            }
            logOutput(output, of: hook, named: FilePath(hook).lastComponent?.string ?? hook, level: outcome.success ? .info : .warning)
        } catch is CancellationError {
            // Shutdown: the hook was ended with its process group; the action itself is not affected.
            meta["error"] = "stopped before it finished: lockwiped is stopping"
            meta["message_id"] = MessageID.hookFailed.metadata
            logger.warning("\(named) stopped before it finished: lockwiped is stopping", metadata: meta)
        } catch {
            meta["error"] = .string(ErrorWords.of(error))
            meta["message_id"] = MessageID.hookFailed.metadata
            logger.error("\(named) could not be run (\(ErrorWords.of(error))); the action goes ahead", metadata: meta)
        }
    }

    /// At most this many lines of a hook's output become entries of their own; the whole
    /// output (up to 1 MiB) is in the summary's `HOOK_OUTPUT` field.
    static let outputLines = 100

    /// Each line of a hook's output as a journal entry of its own, "hook NAME: LINE", as
    /// systemd shows a service's output.
    private func logOutput(_ output: String, of hook: String, named name: String, level: Logger.Level) {
        guard !output.isEmpty else { return }
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
        for line in lines.prefix(Self.outputLines) {
            logger.log(level: level, "hook \(name): \(line)", metadata: ["hook": .string(hook)])
        }
        if lines.count > Self.outputLines {
            logger.log(
                level: level, "hook \(name): \(lines.count - Self.outputLines) more lines in the HOOK_OUTPUT field of its summary entry",
                metadata: ["hook": .string(hook)])
        }
    }

    /// How a hook ended, in words: "exit status 3", "killed by signal 9".
    static func words(_ status: TerminationStatus) -> String {
        switch status {
        case .exited(let code): return "exit status \(code)"
        case .signaled(let signal): return "killed by signal \(signal)"
        }
    }

    private struct ExecutionRecord: Sendable {
        var status: String
        var success: Bool
        var output: String
    }
}

extension Environment.Key {
    static func dictionary(_ env: [String: String]) -> [Environment.Key: String] {
        var out: [Environment.Key: String] = [:]
        for (k, v) in env { out[Environment.Key(stringLiteral: k)] = v }
        return out
    }
}
