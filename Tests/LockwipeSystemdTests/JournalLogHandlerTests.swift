import Glibc
import Logging
import Testing

@testable import LockwipeSystemd

@Suite struct JournalLogHandlerTests {
    /// A pipe standing in for stderr; `drain()` returns everything written so far.
    final class CapturedOutput {
        let readEnd: CInt
        let writeEnd: CInt

        init() {
            var fds: [CInt] = [-1, -1]
            precondition(pipe(&fds) == 0)
            readEnd = fds[0]
            writeEnd = fds[1]
        }

        func drain() -> String {
            close(writeEnd)
            var data: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = read(readEnd, &buffer, buffer.count)
                if count <= 0 { break }
                data += buffer[0..<count]
            }
            return String(decoding: data, as: UTF8.self)
        }

        deinit { close(readEnd) }
    }

    func logger(writingTo output: CapturedOutput, provider: Logger.MetadataProvider? = nil) -> Logger {
        var handler = JournalLogHandler(label: "test", sink: .stderr)
        handler.stderrDescriptor = output.writeEnd
        handler.metadataProvider = provider
        return Logger(label: "test", factory: { _ in handler })
    }

    @Test func defaultSinkPrefersTheJournalUnlessOverridden() {
        #expect(JournalLogHandler.defaultSink(environment: [:], journalSocketExists: true) == .journal)
        #expect(JournalLogHandler.defaultSink(environment: [:], journalSocketExists: false) == .stderr)
        #expect(JournalLogHandler.defaultSink(environment: ["LOCKWIPE_LOG": "stderr"], journalSocketExists: true) == .stderr)
        #expect(JournalLogHandler.defaultSink(environment: ["LOCKWIPE_LOG": "journal"], journalSocketExists: false) == .stderr)
        #expect(JournalLogHandler.defaultSink(environment: ["LOCKWIPE_LOG": "journal"], journalSocketExists: true) == .journal)
    }

    @Test func priorityPrefixesOnlyWhenStderrIsTheJournalStream() {
        #expect(JournalLogHandler.stderrIsJournalStream(journalStream: "8:4242", device: 8, inode: 4242))
        #expect(!JournalLogHandler.stderrIsJournalStream(journalStream: nil, device: 8, inode: 4242))
        #expect(!JournalLogHandler.stderrIsJournalStream(journalStream: "8:4243", device: 8, inode: 4242))
        #expect(!JournalLogHandler.stderrIsJournalStream(journalStream: "9:4242", device: 8, inode: 4242))
        #expect(!JournalLogHandler.stderrIsJournalStream(journalStream: "8:4242:1", device: 8, inode: 4242))
        #expect(!JournalLogHandler.stderrIsJournalStream(journalStream: "", device: 0, inode: 0))
        #expect(!JournalLogHandler.stderrIsJournalStream(journalStream: ":", device: 0, inode: 0))
    }

    @Test func prefixedLinesStartWithTheSyslogPriority() {
        let output = CapturedOutput()
        var handler = JournalLogHandler(label: "test", sink: .stderr, prefixesPriority: true)
        handler.stderrDescriptor = output.writeEnd
        let log = Logger(label: "test", factory: { _ in handler })
        log.error("broken")
        log.notice("fine")
        log.critical("gone")
        #expect(output.drain() == "<3>error broken\n<5>notice fine\n<2>critical gone\n")
    }

    @Test func defaultSinkFollowsTheRealSocket() {
        let exists = access(JournalLogHandler.journalSocketPath, F_OK) == 0
        TestEnvironment.exclusive {
            if getenv("LOCKWIPE_LOG").map({ String(cString: $0) }) != "stderr" {
                #expect(JournalLogHandler.defaultSink() == (exists ? .journal : .stderr))
            }
        }
    }

    @Test func stderrSinkWritesOneLinePerEntryAboveTheLevel() {
        let output = CapturedOutput()
        var log = logger(writingTo: output)
        log.logLevel = .notice
        log[metadataKey: "user"] = "alice"
        log.info("not shown")
        log.warning("lock refused", metadata: ["peer-uid": "65534", "peer_pid": "123"])
        log.notice("locked\nnow")
        #expect(
            output.drain()
                == "warning lock refused LOCKWIPE_PEER_PID=123 LOCKWIPE_PEER_UID=65534 LOCKWIPE_USER=alice\n"
                + "notice locked\\nnow LOCKWIPE_USER=alice\n")
    }

    @Test func callMetadataWinsOverProviderWhichWinsOverHandlerMetadata() {
        let output = CapturedOutput()
        let provider = Logger.MetadataProvider { ["reason": "provider", "action": "provider"] }
        var log = logger(writingTo: output, provider: provider)
        log[metadataKey: "reason"] = "handler"
        log[metadataKey: "action"] = "handler"
        log[metadataKey: "user"] = "handler"
        log.error("x", metadata: ["action": "call"])
        #expect(output.drain() == "error x LOCKWIPE_ACTION=call LOCKWIPE_REASON=provider LOCKWIPE_USER=handler\n")
    }

    @Test func handlerMetadataIsAValue() {
        let output = CapturedOutput()
        var first = logger(writingTo: output)
        var second = first
        first[metadataKey: "user"] = "alice"
        second[metadataKey: "user"] = "bob"
        second.logLevel = .critical
        #expect(first[metadataKey: "user"] == "alice")
        #expect(first.logLevel == .info)
        first.info("a")
        second.error("hidden")
        second.critical("b")
        #expect(output.drain() == "info a LOCKWIPE_USER=alice\ncritical b LOCKWIPE_USER=bob\n")
    }

    struct WipeFailed: Error, CustomStringConvertible {
        var description: String { "disk gone" }
    }

    @Test func eventErrorBecomesAField() {
        let handler = JournalLogHandler(label: "t", sink: .stderr)
        let event = LogEvent(
            level: .error, message: "wipe failed", error: WipeFailed(), metadata: nil, source: nil,
            file: "f", function: "g", line: 1)
        #expect(handler.mergedMetadata(event)["error"] == "disk gone")
        var explicit = event
        explicit.metadata = ["error": "mine"]
        #expect(handler.mergedMetadata(explicit)["error"] == "mine")
    }

    @Test func concurrentLinesDoNotInterleave() async {
        let output = CapturedOutput()
        let log = logger(writingTo: output)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<50 {
                        log.info("entry \(index) from task \(task)", metadata: ["task": "\(task)", "index": "\(index)"])
                    }
                }
            }
        }
        let lines = output.drain().split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 8 * 50 + 1)
        #expect(lines.last == "")
        let pattern = /info entry (\d+) from task (\d+) LOCKWIPE_INDEX=(\d+) LOCKWIPE_TASK=(\d+)/
        for line in lines.dropLast() {
            let match = try? pattern.wholeMatch(in: line)
            #expect(match != nil, "interleaved or malformed: \(line)")
            if let match { #expect(match.1 == match.3 && match.2 == match.4) }
        }
    }

    @Test func journalIOVecsCarryEveryFieldByteForByte() {
        let fields = JournalFields.entry(
            message: "multi\nline ✓", level: .info, metadata: ["reason": "a=b\n\nc", "empty": ""],
            file: "f", function: "g", line: 7, syslogIdentifier: "lockwiped")
        let rebuilt = JournalLogHandler.withIOVecs(fields) { iovecs in
            iovecs.map { iov in
                String(decoding: UnsafeRawBufferPointer(start: iov.iov_base, count: iov.iov_len), as: UTF8.self)
            }
        }
        #expect(rebuilt == fields)
        #expect(rebuilt.contains("LOCKWIPE_EMPTY="))
        #expect(rebuilt.contains("LOCKWIPE_REASON=a=b\n\nc"))
    }

    // The journal sink can only be exercised for real where journald listens; this machine has
    // no /run/systemd/journal/socket, so here the test is skipped rather than faked. Reading the
    // entry back would need journal read access, so it checks sd_journal_sendv's result only.
    @Test(.enabled(if: access(JournalLogHandler.journalSocketPath, W_OK) == 0, "needs a running journald"))
    func journalSinkIsAcceptedByJournald() {
        let fields = JournalFields.entry(
            message: "lockwipe journal sink test\nsecond line", level: .debug, metadata: ["test": "JournalLogHandlerTests"],
            file: #fileID, function: #function, line: #line, syslogIdentifier: "lockwipe-tests")
        #expect(JournalLogHandler.sendToJournal(fields) == 0)
    }
}
