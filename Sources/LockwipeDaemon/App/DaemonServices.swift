import CLockwipeFS
import LockwipeBase
import LockwipeCheckIn
import LockwipeCore
import LockwipeSystemd
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals

// The running daemon's parts, each a `Service` run by `Daemon.run`'s `ServiceGroup` in the
// order they depend on each other (docs/architecture.md, "Start-up, in order"): the
// check-in client, the Manager (the start-up pass, then READY=1), the control socket, then,
// once the pass has ended, timer events, the metrics refresh, SIGHUP reloads and the
// watchdog. The group shuts them down in reverse, each after the ones listed after it have
// ended.

/// Opened once the start-up pass has ended and READY=1 was sent: what must not start before
/// then (reloads, timers, the watchdog) waits for it.
final class StartUpGate: Sendable {
    private struct State {
        var opened = false
        var nextID: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
    }
    private let state = Mutex(State())

    func open() {
        let waiters = state.withLock { state in
            state.opened = true
            defer { state.waiters = [:] }
            return state.waiters.values
        }
        for waiter in waiters { waiter.resume(returning: true) }
    }

    /// true once the gate is open; false if the waiting task is cancelled first.
    func opened() async -> Bool {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: CheckedContinuation<Bool, Never>) in
                let now: Bool? = state.withLock { state in
                    if state.opened { return true }
                    if Task.isCancelled { return false }
                    state.waiters[id] = waiter
                    return nil
                }
                if let now { waiter.resume(returning: now) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: false)
        }
    }
}

/// The policy-server client: closed last, when nothing can start a check-in any more.
/// In-flight check-ins then fail (not a contact, nothing changes); connections close.
struct CheckInClientService: Service, CustomStringConvertible {
    let client: CheckInClient
    var description: String { "check-in client" }

    func run() async {
        // Graceful shutdown, or cancellation when another service failed: closed either way.
        do { try await gracefulShutdown() } catch {}
        await client.shutdown()
    }
}

/// Start-up enforcement, then READY=1; at shutdown the wipes stop and the observers drain.
struct ManagerService: Service, CustomStringConvertible {
    let manager: Manager
    let control: ControlServer
    let notifier: SystemdNotifier
    let logger: Logger
    let paths: DaemonPaths
    /// The socket systemd passed (socket activation), if any.
    let activated: CInt?
    /// Why the control socket could not be bound: the daemon enforces, then exits 1.
    let bindFailure: (any Error)?
    let startUp: StartUpGate
    var description: String { "manager" }

    func run() async throws {
        // Enforcement first: a machine that was off for a month locks or wipes before
        // anyone can log in (READY=1 releases systemd-user-sessions).
        await manager.startUp()
        // Lock on logout starts after the pass: its clocks count from now.
        let unavailable = LogindSessionWatcher.unavailableReason()
        await manager.startLockOnLogout(watcher: unavailable == nil ? LogindSessionWatcher() : nil, unavailableReason: unavailable)
        control.startUpEnded()
        if let bindFailure {
            await manager.stop()
            await manager.drainObservers()
            throw bindFailure
        }

        notifier.ready(status: await manager.statusLine())
        logger.notice(
            "lockwiped \(LockwipeVersion.current) ready",
            metadata: [
                "message_id": MessageID.started.metadata, "socket": .string(activated.map { "fd \($0)" } ?? paths.socketPath),
                "config": .string(paths.configPath), "state_directory": .string(paths.stateDirectory),
            ])
        startUp.open()
        await releaseIdleMemory()

        // Graceful shutdown, or cancellation when another service failed: stopped either way.
        do { try await gracefulShutdown() } catch {}
        notifier.stopping()
        logger.notice("lockwiped stopping", metadata: ["message_id": MessageID.stopping.metadata])
        await manager.stop()
        await manager.drainObservers()
    }

    /// After the start-up pass: gives back what it used and the idle daemon does not need,
    /// SQLite's page cache and the free pages of every malloc arena (`malloc_trim`; the
    /// pass's vault calls ran on a thread each, and their allocations spread over many
    /// arenas), off the actor. Measured in docs/benchmarks.md (idle memory at 1,000 registrations).
    private func releaseIdleMemory() async {
        do {
            try await manager.context.store.releaseMemory()
            _ = try await BlockingPool.run { lockwipe_malloc_trim() }
        } catch {
            manager.context.logger.notice("cannot give back the memory the start-up pass used", metadata: ["error": .string(ErrorWords.of(error))])
        }
    }
}

/// The control socket, bound before the group runs, served from the start, through the
/// start-up pass (its status stays readable even when a shutdown was asked for meanwhile)
/// until graceful shutdown; then drained (`ControlServer.drain`): what was accepted is
/// answered, what comes later waits for the next lockwiped.
struct ControlService: Service, CustomStringConvertible {
    let control: ControlServer
    let server: ControlServer.ServerChannel
    let startUp: StartUpGate
    let logger: Logger
    var description: String { "control socket" }

    func run() async {
        // Not a child task: cancelling this service must not cut the accept loop (`serve`).
        let serving = Task { [control, server, logger] in
            do {
                try await control.serve(server)
            } catch is CancellationError {
                // drained past its limit
            } catch {
                logger.error("control socket failed: \(ErrorWords.of(error))")
            }
        }
        // Cancelled when another service failed: then the gate does not wait either.
        do { try await gracefulShutdown() } catch {}
        _ = await startUp.opened()
        control.manager.stopWipes()
        await control.drain(server, serving: serving)
    }
}

/// A loop that starts once the start-up pass has ended and is cancelled at graceful shutdown.
struct AfterStartUp: Service, CustomStringConvertible {
    let description: String
    let startUp: StartUpGate
    let body: @Sendable () async -> Void

    init(_ description: String, startUp: StartUpGate, body: @escaping @Sendable () async -> Void) {
        self.description = description
        self.startUp = startUp
        self.body = body
    }

    func run() async {
        await cancelWhenGracefulShutdown { [startUp, body] in
            guard await startUp.opened() else { return }
            await body()
        }
    }
}

/// systemd's watchdog (`WatchdogSec=`), pinged every `SystemdNotifier.watchdogInterval()`
/// once the start-up pass has ended.
struct WatchdogService: Service, CustomStringConvertible {
    let notifier: SystemdNotifier
    let interval: Duration
    let startUp: StartUpGate
    var description: String { "watchdog" }

    func run() async {
        await cancelWhenGracefulShutdown { [notifier, interval, startUp] in
            guard await startUp.opened() else { return }
            while !Task.isCancelled {
                notifier.watchdog()
                try? await Task.sleep(for: interval)
            }
        }
    }
}

/// SIGHUP: re-read the configuration; a broken one is reported and the old one kept.
struct ReloadService: Service, CustomStringConvertible {
    let paths: DaemonPaths
    let manager: Manager
    let notifier: SystemdNotifier
    let logger: Logger
    let startUp: StartUpGate
    var description: String { "reload on SIGHUP" }

    func run() async {
        await cancelWhenGracefulShutdown { [self] in
            guard await startUp.opened() else { return }
            await reloadOnHangup()
        }
    }

    private func reloadOnHangup() async {
        for await _ in await UnixSignalsSequence(trapping: .sighup) {
            notifier.reloading()
            do {
                let loaded = try ConfigurationLoader.load(path: paths.configPath, named: paths.configNamed)
                let old = await manager.currentConfiguration
                await manager.reload(loaded.configuration)
                warnIfInsecure(loaded.configuration.server, logger: logger)
                warnMachineProblems(loaded, logger: logger)
                var restartOnly: [String] = []
                if old.hookTimeoutSeconds != loaded.configuration.hookTimeoutSeconds { restartOnly.append("[hooks]") }
                if old.maxConnections != loaded.configuration.maxConnections || old.maxMessageBytes != loaded.configuration.maxMessageBytes
                    || old.idleTimeoutSeconds != loaded.configuration.idleTimeoutSeconds
                {
                    restartOnly.append("[control] limits")
                }
                logger.notice(
                    "configuration reloaded",
                    metadata: [
                        "message_id": MessageID.configReloaded.metadata,
                        "offline_days_before_lock": "\(loaded.configuration.policy.offlineDaysBeforeLock)",
                        "offline_days_before_wipe": "\(loaded.configuration.policy.offlineDaysBeforeWipe)",
                        "server": .string(loaded.configuration.server.url ?? "none"),
                    ])
                if !restartOnly.isEmpty {
                    logger.warning("changes to \(restartOnly.joined(separator: " and ")) take effect at the next restart")
                }
            } catch {
                for problem in error.problems {
                    logger.error(
                        "configuration not reloaded, keeping the previous one: \(problem)",
                        metadata: ["message_id": MessageID.configInvalid.metadata])
                }
                await manager.reloadRejected(error.problems.map(\.description))
            }
            notifier.ready(status: await manager.statusLine())
        }
    }
}
