import Foundation
import LockwipeCore
import LockwipeTestSupport
import Testing

@testable import LockwipeDaemon

/// Issue 41: how often a request reads the registrations from the store (cached or not),
/// counted through the store's fault hook. A new read on one of these paths makes its test
/// fail; the target for a check-in that orders a wipe is one read of the
/// registration itself (met: the second read is the plan over all registrations).
@Suite struct RegistrationReadsTests {
    @Test func aCheckInThatOrdersAWipeReadsTheRegistrationsAFewTimesOnly() async throws {
        var config = Configuration()
        config.server = ServerConfiguration(url: "http://127.0.0.1:9", intervalSeconds: 100_000, timeoutSeconds: 1)
        let fetcher = ScriptedFetcher()
        try await ManagerFixture.run(config, fetcher: fetcher) { f in
            let m = f.manager
            _ = try await m.register(user: "root", directories: [f.directory + "/data/v"], by: ManagerFixture.root)
            // The check-in a registration starts at once has been made, if it is made at all
            // (its answer, a failure, changes nothing this test counts).
            for _ in 0..<100 where fetcher.calls.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
            try await Task.sleep(for: .milliseconds(50))

            fetcher.answer(.wipe)
            f.faults.startCounting()
            let result = await m.checkIn(user: "root", purpose: .requested)
            let reads = f.faults.calls(of: "registrations")
            f.faults.reset()

            #expect(result.state == .wiped, "\(result.reason)")
            // The request's own read, which its turn reuses (the store committed nothing
            // while the server answered); every write after it (the answer's, the wipe's
            // intent) returns the record it wrote, and the plan of the next check-in takes the
            // record the turn ended with. The other read is the plan of the next wake-up, over
            // every registration (the planner's own).
            #expect(reads <= 2, "a check-in that orders a wipe read the registrations \(reads) times")
        }
    }

    @Test func aLockReadsTheRegistrationsOnceAndOnceMoreForThePlan() async throws {
        try await ManagerFixture.run(Configuration()) { f in
            let m = f.manager
            _ = try await m.register(user: "root", directories: [f.directory + "/data/v"], by: ManagerFixture.root)
            f.faults.startCounting()
            let result = try await m.lock(user: "root", trigger: .admin, reason: "test")
            let reads = f.faults.calls(of: "registrations")
            f.faults.reset()

            #expect(result.state == .locked, "\(result.reason)")
            // Finding the registration (its turn reuses that read), and the plan of the next wake-up.
            #expect(reads <= 2, "a lock read the registrations \(reads) times")
        }
    }
}
