import Foundation
import LockwipeCore
import Logging
import Subprocess
#if canImport(System)
import System
#else
import SystemPackage
#endif

/// The `hooks.d` observer: runs every executable in the hooks directory, in lexical order,
/// with the event as arguments (`<event> <user>`) and `LOCKWIPE_*` environment.
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

    /// Executables in `directory` named as run-parts(8) accepts ([A-Za-z0-9_-]+), sorted.
    public static func hooks(in directory: String) -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        return names.sorted().filter { name in
            !name.isEmpty && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }
        }.map { directory + "/" + $0 }.filter { path in
            var st = stat()
            return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && access(path, X_OK) == 0
        }
    }

    public static func environment(_ callback: ObserverCallback, _ event: LockWipeEvent) -> [String: String] {
        [
            "LOCKWIPE_EVENT": callback.rawValue,
            "LOCKWIPE_ACTION": event.action.rawValue,
            "LOCKWIPE_USER": event.user,
            "LOCKWIPE_UID": String(event.uid),
            "LOCKWIPE_REASON": event.reason,
            "LOCKWIPE_TRIGGER": event.trigger.rawValue,
            "LOCKWIPE_DIRECTORIES": event.directories.joined(separator: "\n"),
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ]
    }

    func run(_ callback: ObserverCallback, _ event: LockWipeEvent) async {
        for hook in Self.hooks(in: directory) {
            await runOne(hook, callback, event)
        }
    }

    private func runOne(_ hook: String, _ callback: ObserverCallback, _ event: LockWipeEvent) async {
        var meta: Logger.Metadata = [
            "hook": .string(hook), "event": .string(callback.rawValue), "user": .string(event.user),
        ]
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
                    return ExecutionRecord(status: result.terminationStatus.description, success: result.terminationStatus.isSuccess,
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
            meta["elapsed"] = "\(ContinuousClock.now - started)"
            guard let outcome else {
                meta["message_id"] = MessageID.hookFailed.metadata
                logger.error("hook timed out after \(limit) and was terminated", metadata: meta)
                return
            }
            let output = outcome.output.trimmingCharacters(in: .whitespacesAndNewlines)
            if !output.isEmpty { meta["hook_output"] = .string(output) }
            if outcome.success {
                logger.info("hook finished", metadata: meta)
            } else {
                meta["hook_status"] = .string(outcome.status)
                meta["message_id"] = MessageID.hookFailed.metadata
                logger.warning("hook failed; the action goes ahead", metadata: meta)
            }
        } catch {
            meta["error"] = .string("\(error)")
            meta["message_id"] = MessageID.hookFailed.metadata
            logger.error("hook could not be run; the action goes ahead", metadata: meta)
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
