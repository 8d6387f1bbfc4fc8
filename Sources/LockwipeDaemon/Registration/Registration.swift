import LockwipeBase
import LockwipeCore
import LockwipeVaultIO
import LockwipeWipe

/// One registration, as the Manager holds it while it exists (systemd-homed's `Home` is the
/// model): its registration id and user, and its turn with the operations waiting for it.
/// A name unregistered and registered again is another registration: another id, another
/// object, another turn.
///
/// It lives in the Manager's isolation (a non-Sendable class the actor owns; no actor of
/// its own, so taking the turn costs no hop). The Manager finds it once per operation
/// (`Manager.registration(named:)`) and hands the operation to it.
final class Registration {
    let id: RegistrationID
    let user: String
    /// What its operations work with (the Manager's, built once).
    let context: RegistrationContext
    private let turns = TurnQueue()
    /// The record of the turn running now (nil between turns): what `RegistrationTurn.record` reads.
    /// Boxed: a registration between turns (nearly all of them, nearly always) holds a
    /// pointer for it, not room for a whole record (about 700 bytes inline).
    fileprivate var current: RegistrationRecord? {
        get { currentBox?.record }
        set { currentBox = newValue.map(CurrentRecord.init) }
    }
    private var currentBox: CurrentRecord?
    /// Why the last lock failed, when that failure could not be written to the store: the
    /// registration then reads lock-failed, never locked (`inForce`), in its turns, in
    /// `status` and for the login gate, until a write succeeds.
    var unrecordedLockFailure: String?
    /// The wipe running now, while it runs: how far it is (`status` reads it here).
    var runningWipe: WipeProgress?

    init(id: RegistrationID, user: String, context: RegistrationContext) {
        self.id = id
        self.user = user
        self.context = context
    }

    /// Runs `body` in this registration's turn: after every operation on it that asked
    /// before, and before every one that asks after. The record is read once, when the
    /// turn begins; a registration that is gone by then (unregistered meanwhile) throws
    /// `noSuchRegistration`, and so does a failed read.
    nonisolated(nonsending) func withTurn<T>(_ body: nonisolated(nonsending) (borrowing RegistrationTurn) async throws -> T) async throws -> T {
        try await withTurn(found: nil, body)
    }

    /// `withTurn`, reusing `found` (a record read to find this registration, when the store
    /// had committed `generation` writes) as the turn's record when the store committed
    /// nothing since and the turn was free: nothing can have changed it.
    fileprivate nonisolated(nonsending) func withTurn<T>(
        found: (record: RegistrationRecord, generation: UInt64)?, _ body: nonisolated(nonsending) (borrowing RegistrationTurn) async throws -> T
    ) async throws -> T {
        let waited = await turns.take()
        defer {
            current = nil
            turns.release()
        }
        // The store committed no write since the record was read (a write of any table
        // counts): it is what the store holds still, whatever waited in between (a check-in's
        // request to the server); a turn held by another operation meanwhile reads it again.
        if !waited, let found, found.record.id == id, try context.store.writesCommitted() == found.generation {
            current = inForce(found.record)
        } else {
            current = try await read()
        }
        do {
            return try await body(RegistrationTurn(self))
        } catch let gone as RegistrationGone where gone.id == id {
            throw ManagerError.noSuchRegistration(user)
        }
    }

    /// `r` as it is in force: locked reads lock-failed while a failed lock is unrecorded.
    func inForce(_ r: RegistrationRecord) -> RegistrationRecord {
        guard r.state == .locked, let text = unrecordedLockFailure else { return r }
        var failed = r
        failed.state = .lockFailed
        failed.vaultError = text
        return failed
    }

    private final class CurrentRecord {
        let record: RegistrationRecord
        init(_ record: RegistrationRecord) { self.record = record }
    }

    /// Whose vault a vault call of this registration is on (`VaultCalls` keeps a stuck call's
    /// mark by registration id, so a name registered again is not held by it).
    var vaultOwner: VaultOwner { VaultOwner(registration: id, user: user) }

    /// Whether an operation holds the turn now, and how many wait for it.
    var isBusy: Bool { turns.isBusy }
    var waiting: Int { turns.waiting }

    /// The record of this registration (this id) as the store has it now.
    fileprivate nonisolated(nonsending) func read() async throws -> RegistrationRecord {
        guard let r = try await context.store.registration(id: id) else { throw ManagerError.noSuchRegistration(user) }
        return inForce(r)
    }
}

/// A registration as the registry just found it (`Manager.registration(named:)`): the
/// object and the record read to find it, which its turn reuses when nothing can have
/// changed it since, so that finding a registration and starting an operation on it read
/// its record once.
struct FoundRegistration {
    let registration: Registration
    fileprivate let record: RegistrationRecord
    fileprivate let generation: UInt64

    /// Made by the registry (`Manager.registration(named:)`) and a check-in, from the record
    /// read when the store had committed `generation` writes
    /// (`StateStore.writesCommitted()`, taken before the read).
    init(registration: Registration, record: RegistrationRecord, generation: UInt64) {
        self.registration = registration
        self.record = record
        self.generation = generation
    }

    /// `Registration.withTurn`, on the record found when nothing changed it since.
    nonisolated(nonsending) func withTurn<T>(_ body: nonisolated(nonsending) (borrowing RegistrationTurn) async throws -> T) async throws -> T {
        try await registration.withTurn(found: (record, generation), body)
    }
}

/// The registry the Manager keeps: the object of each registration operations were handed
/// to, by registration id (made when first asked for, forgotten at unregister), and the
/// registry's own turn (registering). Used in the Manager's
/// isolation only.
final class Registry {
    var byID: [RegistrationID: Registration] = [:]
    let turns = TurnQueue()

    /// `r` as it is in force: a lock whose failure could not be recorded reads lock-failed
    /// (`Registration.unrecordedLockFailure`), never locked.
    func inForce(_ r: RegistrationRecord) -> RegistrationRecord {
        byID[r.id]?.inForce(r) ?? r
    }
}

/// Holding a registration's turn, as a value (swift-nio's `NIOIsolatedEventLoop` is the
/// model): only `Registration.withTurn` makes one, and it is not `Sendable`, so a function
/// that takes it as a parameter cannot be called outside the turn. It carries the record
/// read when the turn began. (Like `NIOIsolatedEventLoop` it is copyable: Swift 6.3.1's
/// optimizer crashes specializing generic code over a `~Copyable` turn in a release build.)
struct RegistrationTurn {
    let registration: Registration

    fileprivate init(_ registration: Registration) {
        self.registration = registration
    }

    var user: String { registration.user }

    /// The right to write this registration's rows in the store, which only a turn hands
    /// out: every store write that changes one registration takes it.
    var held: TurnHeld { TurnHeld(registration.id) }

    /// The record read when the turn began (or at the last `refresh()`): what no other
    /// operation on this registration can change while this turn lasts.
    var record: RegistrationRecord { registration.current! }

    /// Goes on with `record`, as a write of this turn returned it (read in the write's
    /// transaction): no read again. A write that found no registration (nil) or another
    /// one (another id) means this registration is gone.
    func committed(_ record: RegistrationRecord?) throws {
        guard let record, record.id == registration.id else { throw ManagerError.noSuchRegistration(registration.user) }
        registration.current = registration.inForce(record)
    }

    /// Reads the record again after this turn committed a change to it, and returns it.
    @discardableResult
    nonisolated(nonsending) func refresh() async throws -> RegistrationRecord {
        let r = try await registration.read()
        registration.current = r
        return r
    }
}

/// What a store write that changes one registration takes: that its turn is held. Only
/// `RegistrationTurn.held` makes one (outside tests), and it is not `Sendable`, so such a
/// write outside the registration's turn does not compile. The writes that need no turn
/// take the id and say why: compare-and-set marks made by the evaluation (`markWarned`,
/// `endLease`), the OAuth client's token rotation (`rotateRefreshToken`), the result of a
/// DELETE sent after a reset (`recordServerResetResult`), and the clock checkpoint over
/// every registration (`checkpointClocks`).
struct TurnHeld {
    let id: RegistrationID

    fileprivate init(_ id: RegistrationID) { self.id = id }

    #if DEBUG
        /// For the store's own unit tests, which have no registration objects. Not in a
        /// release build, so daemon code that used it would not build for the package.
        init(testing id: RegistrationID) { self.id = id }
    #endif
}

@available(*, unavailable)
extension TurnHeld: Sendable {}

/// A turn and its queue: one holder at a time, the others resumed in the order they asked.
/// Used in one isolation only (the Manager's).
final class TurnQueue {
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    var isBusy: Bool { busy }
    var waiting: Int { waiters.count }

    /// Takes the turn, waiting for it if it is held; returns whether it waited. A waiter is
    /// handed the turn by `release` (it stays busy), so that nobody arriving meanwhile can
    /// take it first.
    @discardableResult
    nonisolated(nonsending) func take() async -> Bool {
        guard busy else {
            busy = true
            return false
        }
        await withCheckedContinuation { waiters.append($0) }
        return true
    }

    /// Hands the turn to the next waiter, if any, or frees it.
    func release() {
        if waiters.isEmpty {
            busy = false
        } else {
            waiters.removeFirst().resume()
        }
    }
}
