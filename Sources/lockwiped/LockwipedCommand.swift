import ArgumentParser
import Foundation
import LockwipeCore
import LockwipeDaemon
import LockwipeProtocol
import LockwipeSystemd
import Logging

/// `lockwiped`: the command line of the daemon.
struct LockwipedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lockwiped",
        abstract: "Lock and wipe registered users' data on a shared machine after too long offline.",
        discussion: """
            Normally started by systemd (lockwiped.service). Logs go to the journal, or to \
            standard error when there is no journal (or LOCKWIPE_LOG=stderr). SIGHUP reloads the \
            configuration; SIGTERM stops the daemon. See lockwiped(8) and lockwiped.toml(5).
            """,
        version: LockwipeVersion.current)

    @Option(help: ArgumentHelp("Configuration file; drop-ins are read from FILE.d/*.toml.", valueName: "file"), completion: .file())
    var config: String = DaemonPaths.defaultConfig

    @Option(name: .customLong("state-dir"), help: ArgumentHelp("State directory (the SQLite database).", valueName: "dir"), completion: .directory)
    var stateDirectory: String = DaemonPaths.defaultStateDirectory

    @Option(help: ArgumentHelp("Path of the control socket.", valueName: "path"), completion: .file())
    var socket: String = VarlinkClient.defaultSocketPath

    @Option(name: .customLong("hooks-dir"), help: ArgumentHelp("Directory of hook executables.", valueName: "dir"), completion: .directory)
    var hooksDirectory: String = DaemonPaths.defaultHooksDirectory

    @Flag(name: .customLong("check-config"), help: "Validate the configuration, print every problem, and exit (0 valid, 1 invalid).")
    var checkConfig = false

    init() {}

    /// Whether `--config` was given: then the file must exist (a typo must not mean
    /// "never lock, never wipe"); only the default path may be missing. Read from the
    /// command line, so that `--help` and the man page keep showing the default.
    var configNamed: Bool {
        CommandLine.arguments.dropFirst().contains { $0 == "--config" || $0.hasPrefix("--config=") }
    }

    func validate() throws {
        // Checked before anything starts, so that the error names the option and the limit
        // (binding would fail later with NIO's bare "unixDomainSocketPathTooLong").
        let bytes = socket.utf8.count
        guard bytes <= VarlinkClient.maxSocketPathBytes else {
            throw ValidationError(
                "--socket \(socket): the path is \(bytes) bytes; a Unix socket's path can have at most \(VarlinkClient.maxSocketPathBytes)")
        }
    }

    func run() async throws {
        if checkConfig {
            do throws(ConfigurationError) {
                let loaded = try ConfigurationLoader.load(path: config, named: configNamed)
                for notice in loaded.notices { print("note: \(notice)") }
                // The daemon runs with these (and logs them); a check says the machine is not ready.
                if !loaded.machineProblems.isEmpty { throw ConfigurationError(problems: loaded.machineProblems) }
                let p = loaded.configuration.policy
                print("configuration valid (\(loaded.files.isEmpty ? "defaults" : loaded.files.joined(separator: ", "))): \(p.text)")
                let s = loaded.configuration.server
                if let url = s.url {
                    print("policy server: \(url) (check-in every \(s.intervalSeconds) s, timeout \(s.timeoutSeconds) s\(s.caFile.map { ", extra CA file \($0)" } ?? ""))")
                } else {
                    print("policy server: none configured ([server] url)")
                }
                print("metrics: \(loaded.configuration.metricsSummary)")
                return
            } catch {
                for problem in error.problems { FileHandle.standardError.write(Data("\(problem)\n".utf8)) }
                throw ExitCode(1)
            }
        }
        let sink = JournalLogHandler.defaultSink()
        let prefixed = JournalLogHandler.stderrIsJournalStream()
        // Entries logged while a control request is answered name its client (LOCKWIPE_PEER_*).
        LoggingSystem.bootstrap(
            { label, provider in
                var handler = JournalLogHandler(label: label, sink: sink, prefixesPriority: prefixed)
                handler.metadataProvider = provider
                return handler
            }, metadataProvider: RequestingClient.journalMetadata)
        let logger = Logger(label: "lockwiped")
        var paths = DaemonPaths(configPath: config, stateDirectory: stateDirectory, socketPath: socket, hooksDirectory: hooksDirectory)
        paths.configNamed = configNamed
        let code = await Daemon.run(paths: paths, logger: logger)
        if code != 0 { throw ExitCode(code) }
    }
}
