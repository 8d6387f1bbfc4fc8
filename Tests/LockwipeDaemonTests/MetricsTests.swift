import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeTestSupport
import Logging
import Synchronization
import Testing

@testable import LockwipeDaemon
@testable import LockwipeMetrics

func temporaryDirectory(_ prefix: String) throws -> String {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

/// `[metrics] textfile`: which paths are accepted, and a directory that cannot take the
/// file is a problem of the machine (`--check-config` fails, the daemon runs).
@Suite struct MetricsConfigurationTests {
    func load(_ text: String, in dir: String) -> (Result<ConfigurationLoader.Loaded, ConfigurationError>) {
        let path = dir + "/lockwiped.toml"
        try? text.write(toFile: path, atomically: true, encoding: .utf8)
        do throws(ConfigurationError) {
            return .success(try ConfigurationLoader.load(path: path))
        } catch {
            return .failure(error)
        }
    }

    @Test func aWritableDirectoryIsAccepted() throws {
        let dir = try temporaryDirectory("lwmetrics-cfg")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let loaded = try load("[metrics]\ntextfile = \"\(dir)/lockwipe.prom\"\n", in: dir).get()
        #expect(loaded.configuration.metricsTextfile == dir + "/lockwipe.prom")
        #expect(loaded.machineProblems.isEmpty)
        #expect(try load("[policy]\noffline_days_before_lock = 1\n", in: dir).get().configuration.metricsTextfile == nil)
    }

    @Test(arguments: [
        ("\"lockwipe.prom\"", "must be an absolute path"),
        ("\"/var/lib/prometheus/node-exporter/lockwipe.txt\"", "ending in .prom"),
        ("\"/var/lib/prometheus/node-exporter/\"", "ending in .prom"),
        ("\"/var/lib/prometheus/node-exporter/.prom\"", "ending in .prom"),
        ("true", "must be a string"),
    ])
    func aBadPathIsAProblemWithItsLine(_ value: String, _ phrase: String) throws {
        let dir = try temporaryDirectory("lwmetrics-cfg")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        guard case .failure(let error) = load("# fleet\n[metrics]\ntextfile = \(value)\n", in: dir) else {
            Issue.record("\(value) was accepted")
            return
        }
        #expect(error.problems.count == 1)
        #expect(error.problems.first?.line == 3 && error.problems.first?.key == "metrics.textfile", "\(error.problems)")
        #expect(error.problems.first?.message.contains(phrase) == true, "\(error.problems)")
    }

    /// `[metrics] mode`, `group`, `user_labels`: parsed, and every bad value named with
    /// its file and line.
    @Test func modeGroupAndUserLabelsAreRead() throws {
        let dir = try temporaryDirectory("lwmetrics-cfg")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let defaults = try load("[metrics]\ntextfile = \"\(dir)/lockwipe.prom\"\n", in: dir).get().configuration.metrics
        #expect(defaults == MetricsFileOptions(mode: 0o640, group: nil, userLabels: true))
        let loaded = try load(
            "[metrics]\ntextfile = \"\(dir)/lockwipe.prom\"\nmode = \"0604\"\ngroup = \"root\"\nuser_labels = false\n", in: dir
        ).get()
        #expect(loaded.configuration.metrics == MetricsFileOptions(mode: 0o604, group: "root", userLabels: false))
        #expect(loaded.machineProblems.isEmpty)
        #expect(try load("[metrics]\nmode = \"600\"\n", in: dir).get().configuration.metrics.mode == 0o600)
    }

    @Test(arguments: [
        ("mode = 640", "metrics.mode", "octal file mode as a string"),
        ("mode = \"0648\"", "metrics.mode", "octal file mode of 3 or 4 digits"),
        ("mode = \"4640\"", "metrics.mode", "no setuid"),
        ("mode = \"00640\"", "metrics.mode", "3 or 4 digits"),
        ("mode = \"rw-r-----\"", "metrics.mode", "octal file mode"),
        ("mode = \"0664\"", "metrics.mode", "lets others than root write"),
        ("mode = \"0646\"", "metrics.mode", "lets others than root write"),
        ("group = \"\"", "metrics.group", "must be a group name"),
        ("group = \"a b\"", "metrics.group", "must be a group name"),
        ("group = 0", "metrics.group", "must be a string"),
        ("user_labels = \"no\"", "metrics.user_labels", "must be true or false"),
    ])
    func aBadModeGroupOrLabelSettingIsAProblemWithItsLine(_ line: String, _ key: String, _ phrase: String) throws {
        let dir = try temporaryDirectory("lwmetrics-cfg")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        guard case .failure(let error) = load("# fleet\n[metrics]\n\(line)\n", in: dir) else {
            Issue.record("\(line) was accepted")
            return
        }
        #expect(error.problems.count == 1)
        #expect(error.problems.first?.line == 3 && error.problems.first?.key == key, "\(error.problems)")
        #expect(error.problems.first?.message.contains(phrase) == true, "\(error.problems)")
    }

    /// A group that does not exist is the machine's problem: `--check-config` fails, and
    /// the file is not written (never readable by everyone instead).
    @Test func aMissingGroupIsAMachineProblem() throws {
        let dir = try temporaryDirectory("lwmetrics-cfg")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let loaded = try load("[metrics]\ntextfile = \"\(dir)/lockwipe.prom\"\ngroup = \"lwt-no-such-group\"\n", in: dir).get()
        #expect(loaded.machineProblems.count == 1)
        let problem = loaded.machineProblems.first
        #expect(problem?.line == 3 && problem?.key == "metrics.group" && problem?.message.contains("does not exist") == true, "\(loaded.machineProblems)")
        #expect(throws: MetricsTextfile.MetricsGroupMissing.self) {
            try MetricsTextfile.write("x 1\n", to: dir + "/lockwipe.prom", options: loaded.configuration.metrics)
        }
        #expect(!FileManager.default.fileExists(atPath: dir + "/lockwipe.prom"))
    }

    @Test func aMissingOrUnusableDirectoryIsAMachineProblem() throws {
        let dir = try temporaryDirectory("lwmetrics-cfg")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Data().write(to: URL(fileURLWithPath: dir + "/plain-file"))
        for (directory, phrase) in [(dir + "/missing", "does not exist"), (dir + "/plain-file", "is not a directory")] {
            let loaded = try load("[policy]\noffline_days_before_lock = 1\n\n[metrics]\ntextfile = \"\(directory)/lockwipe.prom\"\n", in: dir).get()
            #expect(loaded.configuration.metricsTextfile == directory + "/lockwipe.prom")
            let problem = loaded.machineProblems.first
            #expect(loaded.machineProblems.count == 1)
            #expect(problem?.file == dir + "/lockwiped.toml" && problem?.line == 5 && problem?.key == "metrics.textfile", "\(loaded.machineProblems)")
            #expect(problem?.message.contains(phrase) == true && problem?.message.contains(directory) == true, "\(loaded.machineProblems)")
        }
    }
}

/// The file is replaced whole, never written in place, with its configured mode and
/// group, and nothing but the file is left in the directory, also when a write fails.
@Suite struct MetricsTextfileTests {
    func entries(_ dir: String) -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted() }

    /// The default: 0640, group prometheus where it exists, else root's group.
    @Test func theDefaultIsNotReadableByOthers() throws {
        let dir = try temporaryDirectory("lwmetrics-write")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The mode is set with fchmod, so the umask (process-wide, shared with tests
        // running in parallel) is left alone here.
        try MetricsTextfile.write("x 1\n", to: dir + "/lockwipe.prom")
        var st = stat()
        #expect(stat(dir + "/lockwipe.prom", &st) == 0 && st.st_mode & 0o7777 == 0o640)
        #expect(st.st_gid == MetricsTextfile.groupID("prometheus") ?? 0)
    }

    // Giving the file another group takes root: skipped (shown as skipped) without.
    /// The configured mode and group, whatever the umask.
    @Test(.enabled(if: getuid() == 0, "giving the file another group takes root"))
    func theConfiguredModeAndGroupAreGiven() throws {
        let dir = try temporaryDirectory("lwmetrics-write")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let gid = try #require(MetricsTextfile.groupID("daemon"))
        try MetricsTextfile.write("x 1\n", to: dir + "/lockwipe.prom", options: MetricsFileOptions(mode: 0o604, group: "daemon"))
        var st = stat()
        #expect(stat(dir + "/lockwipe.prom", &st) == 0 && st.st_mode & 0o7777 == 0o604 && st.st_gid == gid)
        try MetricsTextfile.write("x 2\n", to: dir + "/lockwipe.prom", options: MetricsFileOptions(mode: 0o640, group: "root"))
        #expect(stat(dir + "/lockwipe.prom", &st) == 0 && st.st_mode & 0o7777 == 0o640 && st.st_gid == 0)
        #expect(entries(dir) == ["lockwipe.prom"])
    }

    @Test func theFileIsReplacedAtomicallyWithMode0644() throws {
        let dir = try temporaryDirectory("lwmetrics-write")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/lockwipe.prom"
        let oldMask = umask(0o077)  // what the service's UMask= gives the daemon
        defer { umask(oldMask) }
        let everyone = MetricsFileOptions(mode: 0o644)
        try MetricsTextfile.write("first 1\n", to: path, options: everyone)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "first 1\n")
        var st = stat()
        #expect(stat(path, &st) == 0 && st.st_mode & 0o7777 == 0o644)
        let before = st.st_ino

        // A reader that opened the old file reads the old file to its end: the new text
        // arrives by rename, not by rewriting the file it reads.
        let reader = open(path, O_RDONLY)
        defer { close(reader) }
        try MetricsTextfile.write("second 2\n", to: path, options: everyone)
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = read(reader, &buffer, buffer.count)
        #expect(n > 0 && String(decoding: buffer[0..<n], as: UTF8.self) == "first 1\n")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "second 2\n")
        #expect(stat(path, &st) == 0 && st.st_ino != before && st.st_mode & 0o7777 == 0o644)
        #expect(entries(dir) == ["lockwipe.prom"])
    }

    @Test func aFailedWriteLeavesNoTemporaryFile() throws {
        let dir = try temporaryDirectory("lwmetrics-write")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // The target is a directory: the rename fails after the temporary file was written.
        try FileManager.default.createDirectory(atPath: dir + "/lockwipe.prom", withIntermediateDirectories: false)
        #expect(throws: FileSystemError.self) { try MetricsTextfile.write("x 1\n", to: dir + "/lockwipe.prom") }
        #expect(entries(dir) == ["lockwipe.prom"])
        #expect(entries(dir + "/lockwipe.prom").isEmpty)

        let error = #expect(throws: FileSystemError.self) { try MetricsTextfile.write("x 1\n", to: dir + "/missing/lockwipe.prom") }
        #expect(error?.description.contains(dir + "/missing") == true && error?.description.contains("No such file") == true, "\(String(describing: error))")
    }

    @Test func aSymlinkAtTheTargetIsReplacedNotFollowed() throws {
        let dir = try temporaryDirectory("lwmetrics-write")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "keep\n".write(toFile: dir + "/elsewhere", atomically: false, encoding: .utf8)
        #expect(symlink(dir + "/elsewhere", dir + "/lockwipe.prom") == 0)
        try MetricsTextfile.write("x 1\n", to: dir + "/lockwipe.prom")
        #expect(try String(contentsOfFile: dir + "/elsewhere", encoding: .utf8) == "keep\n")
        var st = stat()
        #expect(lstat(dir + "/lockwipe.prom", &st) == 0 && st.st_mode & S_IFMT == S_IFREG)
    }
}

/// Coalescing and the failure streak, with a fake write and posted work run by hand.
@Suite struct MetricsPublisherTests {
    final class Harness: Sendable {
        let posted = Mutex<[TimerEvents.Work]>([])
        let written = Mutex<[String]>([])
        let readings = Atomic<Int>(0)
        let capture = CapturedLogs()

        func publisher(path: String? = "/m/lockwipe.prom", write: @escaping MetricsPublisher.Write) -> MetricsPublisher {
            let p = MetricsPublisher(path: path, logger: capture.logger, spacing: .zero, write: write)
            p.attach(
                post: { [self] work in posted.withLock { $0.append(work) } },
                snapshot: { [self] in
                    let n = readings.add(1, ordering: .relaxed).newValue
                    return MetricsSnapshot(version: "v", writtenAt: Int64(n), degraded: false, wipesComplete: 0, wipesIncomplete: 0, registrations: [])
                })
            return p
        }

        /// Runs what was posted, until nothing is left.
        func runPosted() async {
            while let work = posted.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { await work() }
        }
        var postedCount: Int { posted.withLock { $0.count } }
        var writes: [String] { written.withLock { $0 } }
    }

    @Test func aBurstOfChangesIsOneWrite() async {
        let h = Harness()
        let p = h.publisher { text, _, _ in h.written.withLock { $0.append(text) } }
        for _ in 0..<200 { p.changed() }
        #expect(h.postedCount == 1)
        await h.runPosted()
        #expect(h.writes.count == 1)
        p.changed()
        await h.runPosted()
        #expect(h.writes.count == 2)
    }

    /// Changes made while a write runs make exactly one more write, with a newer reading.
    @Test func changesDuringAWriteMakeOneMoreWrite() async {
        let h = Harness()
        let publisher = Mutex<MetricsPublisher?>(nil)
        let p = h.publisher { text, _, _ in
            h.written.withLock { $0.append(text) }
            if h.writes.count == 1 {
                for _ in 0..<50 { publisher.withLock { $0 }?.changed() }
            }
        }
        publisher.withLock { $0 = p }
        p.changed()
        await h.runPosted()
        #expect(h.writes.count == 2)
        #expect(h.writes.last?.contains("lockwipe_metrics_last_write_timestamp_seconds 2\n") == true)
        #expect(h.postedCount == 0)
    }

    struct WriteFailed: Error, CustomStringConvertible {
        var description: String { "open /m: Read-only file system" }
    }

    /// One error per failure streak, a notice when writing works again, and a new streak
    /// is logged again.
    @Test func aFailureStreakIsLoggedOnce() async {
        let h = Harness()
        let script = Mutex<[Bool]>([false, false, false, true, true, false, false])
        let p = h.publisher { text, _, _ in
            let ok = script.withLock { $0.isEmpty ? true : $0.removeFirst() }
            guard ok else { throw WriteFailed() }
            h.written.withLock { $0.append(text) }
        }
        for _ in 0..<7 {
            p.changed()
            await h.runPosted()
        }
        let logged = h.capture.all
        #expect(logged.map(\.level) == [.error, .notice, .error], "\(logged)")
        #expect(logged.first?.message.contains("Read-only file system") == true)
        #expect(logged.first?.message.contains("enforcement goes on") == true)
        #expect(h.writes.count == 2)
    }

    @Test func withoutAPathNothingIsWritten() async {
        let h = Harness()
        let p = h.publisher(path: nil) { text, _, _ in h.written.withLock { $0.append(text) } }
        p.changed()
        #expect(h.postedCount == 0)
        p.setPath("/m/lockwipe.prom")
        p.changed()
        await h.runPosted()
        #expect(h.writes.count == 1)
        p.setPath(nil)
        p.changed()
        #expect(h.postedCount == 0)
    }
}

/// The Manager's reading is what `status` reports, and every store write brings the file
/// up to date.
@Suite struct ManagerMetricsTests {
    @Test func theFileFollowsTheState() async throws {
        let dir = try temporaryDirectory("lwmetrics-manager")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var config = Configuration()
        config.policy = Policy(offlineDaysBeforeLock: 7, offlineDaysBeforeWipe: 30)
        config.metricsTextfile = dir + "/lockwipe.prom"
        try await ManagerFixture.run(config) { f in
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/vault"], by: ManagerFixture.root)
            f.clock.advance(seconds: 3 * 86_400)
            let snapshot = try await f.manager.metricsSnapshot()
            let status = try await f.manager.status(for: ManagerFixture.root, user: "root").registrations[0]
            #expect(snapshot.registrations.count == 1)
            let r = snapshot.registrations[0]
            #expect(r.user == "root" && r.uid == 0 && r.state == .active && r.protection == status.protection)
            #expect(r.offlineSeconds == status.offlineSeconds && r.offlineSeconds == 3 * 86_400)
            #expect(r.next == ScheduledAction(action: .lock, inSeconds: 4 * 86_400))
            #expect(snapshot.writtenAt == f.clock.now().wall)

            _ = try await f.manager.lock(user: "root", trigger: .admin, reason: "test")
            // The lock's store write alone brings the file up to date (no other trigger here).
            let deadline = ContinuousClock.now + .seconds(10)
            var text = ""
            while ContinuousClock.now < deadline {
                text = (try? String(contentsOfFile: dir + "/lockwipe.prom", encoding: .utf8)) ?? ""
                if text.contains("lockwipe_registration_state{user=\"root\",uid=\"0\",state=\"locked\"} 1") { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(text.contains("lockwipe_registration_state{user=\"root\",uid=\"0\",state=\"locked\"} 1"), "\(text)")
            #expect(text.contains("lockwipe_registration_next_action_seconds{user=\"root\",uid=\"0\",action=\"wipe\"} \(27 * 86_400)"), "\(text)")
        }
    }
}
