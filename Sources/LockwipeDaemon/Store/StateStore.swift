import Foundation
import GRDB
import LockwipeBase
import LockwipeCore
import Synchronization

/// The daemon's durable state: one SQLite database (WAL, `secure_delete`) in the state
/// directory. Every state transition and the event that records it are written in one
/// transaction, so history and state never disagree after a crash.
///
/// A database that was once created and is now missing or damaged is never silently
/// replaced by an empty one (that would forget every lock and pending wipe): opening
/// throws `StateStoreDamage`. A database deleted or replaced while open is noticed at the
/// next access, and every access after that fails with the same damage.
public final class StateStore: Sendable {
    public static let fileName = "state.sqlite"
    /// Created beside the database once it exists: "there was a database here".
    public static let markerName = "state.created"
    let db: CheckedQueue
    public let path: String
    /// Where the wrapped vault keys are (never in the database: see `KeyFiles`).
    public let keyFiles: KeyFiles
    let registrationCache = Mutex<(generation: UInt64, list: [RegistrationRecord])?>(nil)

    public init(directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        path = directory + "/" + Self.fileName
        keyFiles = KeyFiles(stateDirectory: directory)
        let marker = directory + "/" + Self.markerName
        let existed = FileManager.default.fileExists(atPath: path)
        if !existed, FileManager.default.fileExists(atPath: marker) {
            throw StateStoreDamage.missing(path: path)
        }
        // SQLite says "unable to open database file" (error 14) for a permission problem as
        // for a lost disk: find out first, in the operator's words, and never call it damage.
        try Self.checkAccess(directory: directory, path: path, existed: existed)
        var config = GRDB.Configuration()
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA secure_delete = ON")
        }
        config.busyMode = .timeout(5)
        let previousMask = umask(0o077)
        defer { umask(previousMask) }
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue(path: path, configuration: config)
            try queue.writeWithoutTransaction { db in
                _ = try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL")
            }
            if existed {
                let check = try queue.read { try String.fetchAll($0, sql: "PRAGMA quick_check") }
                if check != ["ok"] { throw StateStoreDamage.damaged(path: path, reason: "integrity check: " + check.prefix(3).joined(separator: "; ")) }
            }
            let walBytes = Self.fileSize(path + "-wal")
            // Rows with a wrapped key that v6-key-files is about to move out.
            let keysMoved = try queue.read { db -> Bool in
                guard try db.tableExists("vault_keys"), try !db.columns(in: "vault_keys").contains(where: { $0.name == "key_file" }) else { return false }
                return try Int.fetchOne(db, sql: "SELECT count(*) FROM vault_keys") ?? 0 > 0
            }
            try Self.migrator(keyFiles).migrate(queue)
            if keysMoved {
                // The wrapped keys the migration moved out may still be in the database
                // file's free space and in WAL frames written before it: overwrite both.
                try Self.scrubWrappedKeyCopies(queue, walBytes: walBytes)
            }
        } catch let damage as StateStoreDamage {
            throw damage
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB {
            // The file opened and SQLite says it is not a database, or a corrupt one.
            throw StateStoreDamage.damaged(path: path, reason: "\(error)")
        } catch {
            // Anything else (an I/O error, a full or read-only disk, a lock held elsewhere)
            // says nothing about the file's content: not damage, and nothing to move aside.
            throw StateStoreUnavailable(path: path, reason: "\(error)")
        }
        if !FileManager.default.fileExists(atPath: marker) {
            guard
                FileManager.default.createFile(
                    atPath: marker, contents: Data("lockwiped created \(Self.fileName) here; if it goes missing, lockwiped refuses to start afresh\n".utf8))
            else {
                throw FileSystemError("create", marker)
            }
        }
        db = try CheckedQueue(queue, path: path)
    }

    /// The store's own serial queue: every query and key-file access runs here, never on
    /// the caller's thread (an actor, the cooperative pool). A call cannot be abandoned
    /// half-way when its task is cancelled: it runs to its end and the caller sees it.
    /// The store's methods are `nonisolated(nonsending)`: they run on the caller's executor
    /// up to the hand-over to this queue, and resume there (no hop to the global executor
    /// and back), which is also what lets the cached `registrations()` answer without one.
    private let queue = DispatchQueue(label: "lockwipe.state-store")

    nonisolated(nonsending) func perform<T: Sendable>(
        _ operation: StaticString = #function, _ body: @escaping @Sendable () throws -> T
    ) async throws -> T {
        try db.faults.check(operation)
        return try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result(catching: body)) }
        }
    }

    /// Gives back the memory SQLite can do without (`sqlite3_db_release_memory`): the
    /// page cache the start-up pass filled. What it held is read again from the file
    /// when a query needs it (the registrations are served from `registrationCache`).
    public nonisolated(nonsending) func releaseMemory() async throws {
        try await perform { [self] in db.releaseMemory() }
    }

    /// Test hook: makes chosen operations fail (`StoreFaults`). Unarmed it costs one
    /// atomic load per access.
    public var faults: StoreFaults { db.faults }

    /// The damage noticed while running, if any (then every access fails with it).
    public var damage: StateStoreDamage? { db.damage }

    /// Called once, when damage is first noticed while running (to log it loudly).
    public func onDamage(_ observer: @escaping @Sendable (StateStoreDamage) -> Void) { db.setObserver(observer) }

    /// Called when a stored value cannot be read back (JSON written by another version, or
    /// damaged), with what it was: the value reads as absent, and the observer (the
    /// Manager: the journal, MESSAGE_ID `stateUnavailable`) says so. On the store's queue.
    public func onUnreadable(_ observer: @escaping @Sendable (String) -> Void) { db.setUnreadableObserver(observer) }

    /// `text` decoded as the JSON this store wrote, or nil when there is none or it does not
    /// decode (then said through `onUnreadable`: never taken as absent in silence).
    func decodeStored<T: Decodable>(_ type: T.Type, _ text: String?, _ what: @autoclosure () -> String) -> T? {
        guard let text else { return nil }
        do {
            return try StoredJSON.decoder().decode(type, from: Data(text.utf8))
        } catch {
            db.unreadable("\(what()) cannot be read back (\(ErrorWords.of(error))); it is taken as absent")
            return nil
        }
    }

    /// Called after every write, on the store's queue (so it must be quick and never
    /// block): what the metrics file shows may have changed.
    func onWrite(_ observer: @escaping @Sendable () -> Void) { db.setWriteObserver(observer) }

    /// A store that fails every access with `damage`: what the daemon runs with when its
    /// database cannot be trusted, so that it still answers `status` with the reason.
    public init(damaged damage: StateStoreDamage) throws {
        path = {
            switch damage {
            case .missing(let p), .damaged(let p, _), .replaced(let p): return p
            }
        }()
        keyFiles = KeyFiles(stateDirectory: (path as NSString).deletingLastPathComponent)
        db = try CheckedQueue(DatabaseQueue(), path: path, damage: damage)
    }

    /// The database (when it exists) must open for reading and writing, and the directory
    /// must take new files (the WAL and the shared-memory index beside it).
    private static func checkAccess(directory: String, path: String, existed: Bool) throws(StateDirectoryAccess) {
        if existed {
            let fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { throw StateDirectoryAccess(operation: "open", path: path, stateDirectory: directory, code: errno) }
            close(fd)
        }
        guard access(directory, W_OK | X_OK) == 0 else {
            throw StateDirectoryAccess(operation: "write in", path: directory, stateDirectory: directory, code: errno)
        }
    }

    private static func fileSize(_ path: String) -> Int64 {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_size) : 0
    }
}

/// The database queue, checked before every access: the file at `path` must still be the
/// one that was opened (same device and inode). A state directory cleaned out by hand
/// would otherwise let the daemon write on into an unlinked file and start empty at the
/// next restart.
final class CheckedQueue: Sendable {
    private let queue: DatabaseQueue
    private let path: String
    private let identity: (dev: UInt64, ino: UInt64)
    private let noticed: Mutex<StateStoreDamage?>
    private let observer = CallbackSlot<StateStoreDamage>()
    let faults = StoreFaults()

    init(_ queue: DatabaseQueue, path: String, damage: StateStoreDamage? = nil) throws {
        self.queue = queue
        self.path = path
        noticed = Mutex(damage)
        var st = stat()
        if damage == nil {
            guard stat(path, &st) == 0 else { throw StateStoreDamage.replaced(path: path) }
        }
        identity = (UInt64(st.st_dev), UInt64(st.st_ino))
    }

    func setObserver(_ o: @escaping @Sendable (StateStoreDamage) -> Void) { observer.set(o) }

    private let unreadableObserver = CallbackSlot<String>()
    func setUnreadableObserver(_ o: @escaping @Sendable (String) -> Void) { unreadableObserver.set(o) }
    func unreadable(_ what: String) { unreadableObserver.call(what) }

    private let writeObserver = CallbackSlot<Void>()
    func setWriteObserver(_ o: @escaping @Sendable () -> Void) { writeObserver.set { _ in o() } }

    var damage: StateStoreDamage? {
        try? check()
        return noticed.withLock { $0 }
    }

    private func latch(_ damage: StateStoreDamage) -> StateStoreDamage {
        let first = noticed.withLock { current -> Bool in
            guard current == nil else { return false }
            current = damage
            return true
        }
        if first { observer.call(damage) }
        return noticed.withLock { $0 } ?? damage
    }

    private func check() throws {
        if let known = noticed.withLock({ $0 }) { throw known }
        var st = stat()
        guard stat(path, &st) == 0, UInt64(st.st_dev) == identity.dev, UInt64(st.st_ino) == identity.ino else {
            throw latch(.replaced(path: path))
        }
    }

    /// Runs `body`; SQLite saying the file is corrupt or not a database latches that damage.
    private func guarded<T>(_ body: () throws -> T) throws -> T {
        try check()
        do {
            return try body()
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB {
            throw latch(.damaged(path: path, reason: "\(error)"))
        }
    }

    /// Counts the writes (bumped after each one returns, committed or not): what was read
    /// at generation g is still what the database holds while the generation is g.
    private let writes = Atomic<UInt64>(0)

    /// The current write generation, after checking the file is still the one opened.
    func writeGeneration() throws -> UInt64 {
        try check()
        return writes.load(ordering: .acquiring)
    }

    private func written<T>(_ body: () throws -> T) throws -> T {
        defer {
            writes.add(1, ordering: .releasing)
            writeObserver.call(())
        }
        return try guarded(body)
    }

    func read<T>(_ value: (Database) throws -> T) throws -> T { try guarded { try queue.read(value) } }
    func write<T>(_ updates: (Database) throws -> T) throws -> T { try written { try queue.write(updates) } }
    func writeWithoutTransaction<T>(_ updates: (Database) throws -> T) throws -> T { try written { try queue.writeWithoutTransaction(updates) } }
    func inDatabase<T>(_ work: (Database) throws -> T) throws -> T { try written { try queue.inDatabase(work) } }
    func releaseMemory() { queue.releaseMemory() }
}

/// A test hook of the store: operations made to fail as a full disk or an I/O error would,
/// so that unit tests can show what the daemon does when its state cannot be read or
/// written. Nothing arms it outside tests; unarmed, a check is one relaxed atomic load.
public final class StoreFaults: Sendable {
    /// The error an injected fault throws (in words like SQLite's own).
    public struct Injected: Error, Equatable, CustomStringConvertible {
        public var operation: String
        public var description: String { "disk I/O error (injected by a test) in \(operation)" }
    }

    private let armed = Atomic<Bool>(false)
    private let plan = Mutex<[String: Int]>([:])
    private let counted = Mutex<[String: Int]?>(nil)

    init() {}

    /// The next `count` calls of the store method `operation` fail: its name without
    /// arguments (`"registrations"`, `"setVaultError"`); `registration(_:)` reads through
    /// `registrations`. `.max`: every call until `reset()`.
    public func failNext(_ count: Int = 1, of operation: String) {
        plan.withLock { $0[operation, default: 0] = count }
        armed.store(true, ordering: .releasing)
    }

    /// No fault any more, and nothing counted.
    public func reset() {
        plan.withLock { $0 = [:] }
        counted.withLock { $0 = nil }
        armed.store(false, ordering: .releasing)
    }

    /// From now on, counts the calls of every store method (by the same names as
    /// `failNext`), so a test can say how often an operation reads the store.
    public func startCounting() {
        counted.withLock { $0 = [:] }
        armed.store(true, ordering: .releasing)
    }

    /// The calls of `operation` since `startCounting()`.
    public func calls(of operation: String) -> Int {
        counted.withLock { $0?[operation] ?? 0 }
    }

    func check(_ operation: StaticString) throws(Injected) {
        guard armed.load(ordering: .acquiring) else { return }
        let name = "\(operation)".prefix { $0 != "(" }
        counted.withLock { $0?[String(name), default: 0] += 1 }
        let fail = plan.withLock { calls -> Bool in
            guard let left = calls[String(name)], left > 0 else { return false }
            if left != .max { calls[String(name)] = left - 1 }
            return true
        }
        if fail { throw Injected(operation: String(name)) }
    }
}
