import CLockwipeFS
import Foundation
import LockwipeBase
import LockwipeCheckIn
import LockwipeCore
import LockwipeSystemd
import LockwipeVaultIO
import LockwipeWipe
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import UnixSignals

/// Where the daemon keeps and finds things; every path can be overridden for tests and
/// unprivileged runs.
public struct DaemonPaths: Sendable {
    public static let defaultConfig = "/etc/lockwipe/lockwiped.toml"
    public static let defaultStateDirectory = "/var/lib/lockwipe"
    public static let defaultHooksDirectory = "/etc/lockwipe/hooks.d"

    public var configPath: String
    public var stateDirectory: String
    public var socketPath: String
    public var hooksDirectory: String
    /// The configuration file was named explicitly (`--config`): it must exist.
    public var configNamed = false

    public init(configPath: String, stateDirectory: String, socketPath: String, hooksDirectory: String) {
        self.configPath = configPath
        self.stateDirectory = stateDirectory
        self.socketPath = socketPath
        self.hooksDirectory = hooksDirectory
    }
}

/// Wires the daemon together and runs it until SIGTERM.
public enum Daemon {
    /// Catches SIGTERM and SIGINT from now on (`StopSignals`): lockwiped does it before
    /// anything else, and `run` stops gracefully on the first one, even one caught before it.
    public static func catchStopSignals() throws { try StopSignals.install() }

    /// Runs the daemon; returns the process exit code.
    public static func run(paths: DaemonPaths, logger: Logger) async -> Int32 {
        // Before any key is read: a process holding vault keys leaves no core dump, and
        // no process without CAP_SYS_PTRACE, root's included, may ptrace it or read its
        // /proc/PID/mem (the unit's LimitCORE=0 says the same to systemd).
        let dumpable = lockwipe_set_non_dumpable()
        if dumpable != 0 {
            logger.warning("cannot make lockwiped non-dumpable (prctl PR_SET_DUMPABLE): \(String(cString: strerror(-dumpable)))")
        }
        // Two malloc arenas, not glibc's eight per CPU: each thread that allocates would
        // otherwise take one of its own and keep its partly used pages (the control
        // connections' event loop, the pools, the start-up pass's vault threads). Idle
        // anonymous memory at 1,000 registrations: 8.4 -> 7.1 MiB (docs/benchmarks.md).
        if lockwipe_limit_malloc_arenas(2) != 1 {
            logger.notice("cannot limit malloc's arenas (mallopt M_ARENA_MAX): idle memory may be higher")
        }
        if geteuid() != 0 {
            logger.warning(
                "lockwiped is not running as root (it runs as \(StateDirectoryAccess.processUser())): it cannot lock, wipe or end the processes of other users' vaults; it is meant to run as root, from lockwiped.service"
            )
        }
        // One daemon per state directory, before anything else is opened, read or bound:
        // a second one would enforce on the same records and take the socket away.
        let lock: StateDirectoryLock
        do {
            lock = try StateDirectoryLock.acquire(stateDirectory: paths.stateDirectory)
        } catch {
            logger.critical("\(error)", metadata: ["state_directory": .string(paths.stateDirectory)])
            return 1
        }
        defer { withExtendedLifetime(lock) {} }
        let loaded: ConfigurationLoader.Loaded
        do {
            loaded = try ConfigurationLoader.load(path: paths.configPath, named: paths.configNamed)
        } catch {
            for problem in error.problems {
                logger.critical("invalid configuration: \(problem)", metadata: ["message_id": MessageID.configInvalid.metadata])
            }
            return 1
        }
        for notice in loaded.notices { logger.notice("\(notice)") }
        warnIfInsecure(loaded.configuration.server, logger: logger)
        warnMachineProblems(loaded, logger: logger)

        let store: StateStore
        do {
            store = try StateStore(directory: paths.stateDirectory)
        } catch let damage as StateStoreDamage {
            // Never start afresh over a database that was there: run, enforce nothing,
            // and answer status with the reason, so the operator learns what happened.
            logger.critical(
                "\(damage)",
                metadata: [
                    "message_id": MessageID.stateDamaged.metadata, "path": .string(paths.stateDirectory + "/" + StateStore.fileName),
                ])
            do {
                store = try StateStore(damaged: damage)
            } catch {
                return 1
            }
        } catch let access as StateDirectoryAccess {
            // Permissions, a read-only file system, a lost disk: not damage. Nothing is
            // moved or started afresh; the unit shows failed with this reason.
            logger.critical("\(access); lockwiped cannot run without its state database", metadata: ["path": .string(access.path)])
            return 1
        } catch {
            let path = paths.stateDirectory + "/" + StateStore.fileName
            logger.critical(
                "cannot open the state database \(path): \(ErrorWords.of(error)); refusing to run without it",
                metadata: ["path": .string(path), "error": .string(ErrorWords.of(error))])
            return 1
        }

        let config = loaded.configuration
        let notifier = SystemdNotifier()
        let clock = SystemClock()
        let checkInClient = CheckInClient(
            tokenStorage: .init(
                // The token cache goes by name (its entries are checked against the stored
                // refresh token at every use); the store is asked about the registration
                // that holds the name now.
                load: { user in
                    guard let r = try await store.registration(user) else { return nil }
                    return try await store.refreshToken(registration: r.id)
                },
                rotate: { user, old, new in
                    guard let r = try await store.registration(user) else { return false }
                    return try await store.rotateRefreshToken(registration: r.id, from: old, to: new, at: clock.now().wall)
                }),
            sharedRefresh: { refresh in await RequestingClient.$current.withValue(nil) { await refresh() } },
            logger: logger)
        let hooks = HookRunner(directory: paths.hooksDirectory, timeout: .seconds(config.hookTimeoutSeconds), logger: logger)
        let manager = Manager(
            configuration: config, store: store, clock: clock, protection: PermissionLock(), eraser: SecureEraser(),
            observers: ObserverHub([hooks]), logger: logger, notifier: notifier,
            paths: paths, fetcher: checkInClient)
        let control = ControlServer(
            manager: manager, logger: logger,
            limits: .init(
                maxConnections: config.maxConnections, maxMessageBytes: config.maxMessageBytes,
                idleTimeout: .seconds(Int64(config.idleTimeoutSeconds))))
        // The socket first, so that the start-up pass can be watched: until it has ended
        // the socket answers status (and service information) only; every other request,
        // the login gate's included, is refused with StartingUp (ControlServer).
        let activated = SocketActivation.listenFileDescriptors().first
        var server: ControlServer.ServerChannel?
        var bindFailure: (any Error)?
        var bound: [UInt64]?
        do {
            server = try await control.bind(path: paths.socketPath, activatedFD: activated, group: .singleton)
            // What this instance bound: at exit the socket is removed only if it is still that one.
            bound = activated == nil ? socketIdentity(of: paths.socketPath) : nil
        } catch let inUse as SocketInUse {
            // Another daemon serves it: this one does nothing at all.
            await checkInClient.shutdown()
            logger.critical("lockwiped failed: \(ErrorWords.of(inUse))")
            return 1
        } catch {
            bindFailure = error  // enforcement does not wait for the socket
        }

        // Each part is a service, listed in the order they depend on each other: started in
        // this order, shut down in reverse, each once the ones after it have ended.
        let startUp = StartUpGate()
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: CheckInClientService(client: checkInClient)),
            .init(
                service: ManagerService(
                    manager: manager, control: control, notifier: notifier, logger: logger, paths: paths, activated: activated,
                    bindFailure: bindFailure, startUp: startUp)),
        ]
        if let server {
            services.append(.init(service: ControlService(control: control, server: server, startUp: startUp, logger: logger)))
        }
        services.append(.init(service: AfterStartUp("timer events", startUp: startUp) { await manager.timerEvents.run() }))
        // At least every check-in interval (`[server] interval`, also without a server).
        services.append(
            .init(
                service: AfterStartUp("metrics refresh", startUp: startUp) {
                    await manager.metrics.refreshPeriodically { manager.context.configuration.server.intervalSeconds }
                }))
        services.append(.init(service: ReloadService(paths: paths, manager: manager, notifier: notifier, logger: logger, startUp: startUp)))
        if let interval = SystemdNotifier.watchdogInterval() {
            services.append(.init(service: WatchdogService(notifier: notifier, interval: interval, startUp: startUp)))
        }
        // SIGTERM and SIGINT are lockwiped's own from its first steps (`StopSignals`): one
        // that came while the daemon was being set up stops the group as soon as it runs.
        let group = ServiceGroup(configuration: .init(services: services, logger: logger))
        let stopSignal = Task {
            if await StopSignals.next() != nil { await group.triggerGracefulShutdown() }
        }
        defer { stopSignal.cancel() }
        defer { if let bound, socketIdentity(of: paths.socketPath) == bound { unlink(paths.socketPath) } }
        do {
            try await group.run()
            return 0
        } catch {
            logger.critical("lockwiped failed: \(ErrorWords.of(error))")
            return 1
        }
    }
}

/// The device and inode of the socket file at `path` (not following a symlink).
private func socketIdentity(of path: String) -> [UInt64]? {
    var st = stat()
    guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFSOCK else { return nil }
    return [UInt64(st.st_dev), UInt64(st.st_ino)]
}

/// `[server] allow_insecure_http` is in use: said at every start and reload.
func warnIfInsecure(_ server: ServerConfiguration, logger: Logger) {
    guard server.usesInsecureHTTP, let url = server.url else { return }
    logger.warning(
        "the policy server is reached over plain http:// (allow_insecure_http = true): any local user who binds that port first receives every registration's token and can order locks and wipes",
        metadata: ["message_id": MessageID.insecureServer.metadata, "server": .string(url)])
}

/// What `--check-config` fails on but the daemon runs with (a metrics directory that is
/// missing or read-only): said at every start and reload.
func warnMachineProblems(_ loaded: ConfigurationLoader.Loaded, logger: Logger) {
    for problem in loaded.machineProblems {
        logger.warning("\(problem); lockwiped runs and enforces as configured, without metrics until this is fixed")
    }
}
