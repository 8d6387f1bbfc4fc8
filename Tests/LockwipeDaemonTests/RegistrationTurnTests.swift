import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeTestSupport
import Synchronization
import Testing

@testable import LockwipeDaemon

/// Each registration is an object with a turn of its own (`Registration`): operations on
/// one run one at a time, operations on two interleave, a name registered again is another
/// registration with another turn, and registering takes the registry's turn.
@Suite(.timeLimit(.minutes(1))) struct RegistrationTurnTests {
    var root: Caller { ManagerFixture.root }

    /// Two registrations (root and daemon), each with a vault of its own.
    func withTwo(_ body: (ManagerFixture) async throws -> Void) async throws {
        try await ManagerFixture.run { f in
            _ = try await f.manager.register(user: "root", directories: [f.directory + "/data/root"], by: root)
            _ = try await f.manager.register(user: "daemon", directories: [f.directory + "/data/daemon"], by: root)
            try await body(f)
        }
    }

    /// A turn reuses the record read to find its registration only while the store has
    /// committed nothing since (issue 41): a write in between, by anything (here the store
    /// itself, as a write outside any turn would), makes the turn read it again.
    @Test func aTurnReadsTheRecordAgainWhenTheStoreWasWrittenSinceItWasFound() async throws {
        try await withTwo { f in
            let store = await f.manager.context.store
            let unchanged = try await f.manager.stateInTurn(of: "root", after: {})
            #expect(unchanged == .active)
            let changed = try await f.manager.stateInTurn(of: "root") {
                try await store.commitWipeIntent(
                    TurnHeld(testing: try #require(try await store.registration("root")).id), reason: "test", trigger: .admin,
                    event: StoredEvent(time: 1, user: "root", kind: .wipeStarted, trigger: .admin, detail: "test"))
            }
            #expect(changed == .wipePending, "the turn worked on the record read before the write")
        }
    }

    /// Waits (a bounded while) until `n` operations wait for `user`'s turn.
    func waitUntil(_ manager: Manager, queued n: Int, on user: String) async throws {
        for _ in 0..<1_000 {
            if try await manager.waiting(for: user) >= n { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("\(n) operation(s) never queued for the turn of \(user)")
    }

    /// Runs `body` while another task holds the turn of `user`'s registration, then lets it go.
    func whileHeld(_ f: ManagerFixture, _ user: String, _ body: () async throws -> Void) async throws {
        let gate = Gate()
        let held = Gate()
        let holder = Task { try await f.manager.holdTurn(of: user, held: held, until: gate) }
        await held.wait()
        do {
            try await body()
        } catch {
            await gate.open()
            _ = await holder.result
            throw error
        }
        await gate.open()
        try await holder.value
    }

    @Test func operationsOnOneRegistrationRunOneAtATime() async throws {
        try await withTwo { f in
            var lock: Task<Outcome, any Error>?
            try await whileHeld(f, "root") {
                lock = Task { try await f.manager.lock(user: "root", trigger: .admin, reason: "test") }
                // The lock waits for the turn, and has changed nothing while it waits.
                try await waitUntil(f.manager, queued: 1, on: "root")
                #expect(try await f.manager.context.store.registration("root")?.state == .active)
            }
            #expect(try await lock?.value.state == .locked)
            #expect(try await f.manager.context.store.registration("root")?.state == .locked)
        }
    }

    @Test func operationsOnTwoRegistrationsInterleave() async throws {
        try await withTwo { f in
            try await whileHeld(f, "root") {
                // root's turn is held: daemon's lock runs to its end meanwhile.
                let locked = try await f.manager.lock(user: "daemon", trigger: .admin, reason: "test")
                #expect(locked.state == .locked)
                #expect(try await f.manager.busy("root"))
            }
        }
    }

    @Test func aNameRegisteredAgainIsAnotherRegistrationWithAnotherTurn() async throws {
        try await ManagerFixture.run { f in
            let vault = f.directory + "/data/root"
            _ = try await f.manager.register(user: "root", directories: [vault], by: root)
            let probe = try await f.manager.reRegister("root", directories: [vault], by: root)
            #expect(probe.oldID != probe.newID)
            #expect(!probe.sameObject)
            // In the new registration's turn, the old one's turn is free, and finds it gone.
            #expect(probe.oldTurnWhileNewHeld == .noSuchRegistration("root"))
        }
    }

    /// Two registrations of one directory at once: the registry's turn lets one take it.
    /// root's is slow inside the turn (its account lookup takes 300 ms): daemon's, asked
    /// meanwhile, waits for the turn, so it sees root's directory taken.
    @Test func concurrentRegistrationsOfOneDirectoryTakeItOnce() async throws {
        let accounts = SlowAccounts(ManagerFixture.accounts, slow: "root")
        try await ManagerFixture.run(accounts: accounts) { f in
            let dir = f.directory + "/data/shared"
            let first = Task { await Result { try await f.manager.register(user: "root", directories: [dir], by: root) } }
            while !accounts.entered { try await Task.sleep(for: .milliseconds(2)) }
            let second = await Result { try await f.manager.register(user: "daemon", directories: [dir], by: root) }
            let results = [await first.value, second]
            #expect((try? results[0].get())?.state == .active)
            guard case .failure(ManagerError.registrationRefused(let why)) = results[1] else {
                Issue.record("daemon's registration of root's directory was not refused: \(results[1])")
                return
            }
            #expect(why.contains(dir))
        }
    }
}

/// Accounts from a table, where looking up `slow` takes 300 ms (on the pool, as NSS would).
final class SlowAccounts: AccountLookup {
    let table: TableAccounts
    let slow: String
    private let started = Atomic<Bool>(false)
    var entered: Bool { started.load(ordering: .acquiring) }

    init(_ table: TableAccounts, slow: String) {
        self.table = table
        self.slow = slow
    }

    func account(named name: String) -> Account? {
        if name == slow {
            started.store(true, ordering: .releasing)
            Thread.sleep(forTimeInterval: 0.3)
        }
        return table.account(named: name)
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}

/// Opens once; every waiter, before or after, goes on.
actor Gate {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func open() {
        isOpen = true
        for w in waiters { w.resume() }
        waiters = []
    }

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }
}

extension Manager {
    /// Finds `user`'s registration, runs `between`, then reads the state its turn begins with.
    func stateInTurn(of user: String, after between: @Sendable () async throws -> Void) async throws -> RegistrationState {
        let found = try await registration(named: user)
        try await between()
        return try await found.withTurn { turn in turn.record.state }
    }

    /// Holds the turn of `user`'s registration until `gate` opens (`held` opens once it does).
    func holdTurn(of user: String, held: Gate, until gate: Gate) async throws {
        try await registration(named: user).withTurn { _ in
            await held.open()
            await gate.wait()
        }
    }

    func waiting(for user: String) async throws -> Int {
        try await registration(named: user).registration.waiting
    }

    func busy(_ user: String) async throws -> Bool {
        try await registration(named: user).registration.isBusy
    }

    struct ReRegistered: Sendable {
        var oldID: RegistrationID
        var newID: RegistrationID
        var sameObject: Bool
        var oldTurnWhileNewHeld: ManagerError?
    }

    /// Unregisters `user` and registers it again; in the new registration's turn, takes
    /// the old one's.
    func reRegister(_ user: String, directories: [String], by caller: Caller) async throws -> ReRegistered {
        let old = try await registration(named: user).registration
        _ = try await unregister(user: user, by: caller)
        _ = try await register(user: user, directories: directories, by: caller)
        let new = try await registration(named: user).registration
        let oldTurn: ManagerError? = try await new.withTurn { _ in
            do {
                try await old.withTurn { _ in }
                return nil
            } catch let error as ManagerError {
                return error
            }
        }
        return ReRegistered(oldID: old.id, newID: new.id, sameObject: old === new, oldTurnWhileNewHeld: oldTurn)
    }
}
