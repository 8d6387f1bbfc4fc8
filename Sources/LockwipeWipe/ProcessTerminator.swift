import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeVaultIO

/// Ends every process of a user, so that a lock also cuts off what she opened before it:
/// open descriptors and working directories, a vault bind-mounted in a mount namespace of
/// her own (whose `/proc` links print another path), descriptors of the vault parked in a
/// socket message that only a socket of hers holds (closed with her last process). A
/// process is hers when any of its real, effective, saved or filesystem uids is hers
/// (`ProcessOwnership`); root's processes and other accounts' are never ended
/// (`docs/security.md` says why, and what a permission lock therefore cannot revoke).
///
/// She may fork while `/proc` is read, so ending is a loop of scans, bounded in passes and
/// time: SIGTERM to every process found (those forked meanwhile too) until none is left or
/// `grace` has passed; then, pass after pass, SIGSTOP to every process found and scans
/// again until a scan finds none that was not stopped (a stopped process cannot fork),
/// SIGKILL to all of them, and a new pass, until a scan finds no process of hers.
///
/// A pid is read from `/proc` and signalled a moment later; it could only be another
/// process's by then if the kernel reused it in between (it hands out pids in order, up
/// to `pid_max`), which is not in her power.
public struct ProcessTerminator: Sendable {
    public var grace: TimeInterval
    /// How long the SIGSTOP/SIGKILL passes may take after the grace, and how many there may be.
    public var limit: TimeInterval = 10
    public var passes = 200
    /// A process left alone: the client whose request ends its own user's processes (her
    /// own lock or wipe), so that it can read the answer
    /// (`Manager.endClientAfterOwnRequest` ends it afterwards).
    public var spared: Int32?

    public init(grace: TimeInterval, sparing spared: Int32? = nil) {
        self.grace = grace
        self.spared = spared
    }

    /// What `terminate` did: the pids it signalled, and the processes of hers still
    /// running when its passes ran out (in an uninterruptible wait, or forking faster than
    /// the passes); a lock with survivors is not complete.
    public struct Outcome: Sendable, Equatable {
        public var ended: [Int32]
        public var survivors: [Int32]
    }

    /// Ends every process of `uid` (none for uid 0); with `only`, that one process if it
    /// is still hers.
    public func terminate(uid: UInt32, only: Int32? = nil) -> Outcome {
        guard uid != 0 else { return Outcome(ended: [], survivors: []) }
        let processes = { only.map { pid in self.processes(of: uid).filter { $0 == pid } } ?? self.processes(of: uid) }
        var signalled = Set<Int32>()
        let graceEnd = Date().addingTimeInterval(grace)
        // Counted as well as timed: under a frozen (faked) clock the grace still ends.
        var waits = 0
        while true {
            let found = processes()
            if found.isEmpty { return Outcome(ended: signalled.sorted(), survivors: []) }
            waits += 1
            if Date() >= graceEnd || Double(waits) > grace * 20 + 1 { break }
            for pid in found where !signalled.contains(pid) { kill(pid, SIGTERM) }
            signalled.formUnion(found)
            usleep(50_000)
        }
        let end = Date().addingTimeInterval(limit)
        var pass = 0
        while true {
            var found = Set(processes())
            if found.isEmpty { return Outcome(ended: signalled.sorted(), survivors: []) }
            pass += 1
            if pass > passes || Date() >= end { return Outcome(ended: signalled.sorted(), survivors: found.sorted()) }
            // Freeze what was found, then what was forked before the stop arrived, until a
            // scan finds nothing new; then none of them can fork any more.
            var stopped = Set<Int32>()
            var freezes = 0
            while !found.subtracting(stopped).isEmpty, freezes < passes {
                freezes += 1
                for pid in found.subtracting(stopped) { kill(pid, SIGSTOP) }
                stopped.formUnion(found)
                found = Set(processes())
            }
            for pid in stopped.union(found) { kill(pid, SIGKILL) }
            signalled.formUnion(stopped.union(found))
            usleep(20_000)
        }
    }

    /// Pids of `uid`'s processes that still run code (a zombie is gone for this purpose;
    /// a process whose main thread has exited but whose other threads run is not).
    ///
    /// A lock scans `/proc` twice and a wipe locks first: one pass with `readdir`, each
    /// status read whole into one reused buffer and only its `Uid:` line made a string for
    /// `ProcessOwnership` (which decides on that line alone either way). Listing `/proc`
    /// through Foundation and splitting every status into lines took most of a lock's
    /// 45 ms beside an unlink-only wipe (docs/benchmarks.md, "Unlink only").
    package func processes(of uid: UInt32) -> [Int32] {
        guard let proc = opendir("/proc") else { return [] }
        defer { closedir(proc) }
        let me = getpid()
        var buffer = [UInt8](repeating: 0, count: 4096)
        var found: [Int32] = []
        while let entry = readdir(proc) {
            guard let pid = Self.pid(named: entry), pid != me, pid > 1, pid != spared,
                let line = Self.uidLine(of: pid, buffer: &buffer),
                ProcessOwnership.belongs(status: line, to: uid), Self.isRunning(pid)
            else { continue }
            found.append(pid)
        }
        return found.sorted()
    }

    /// The pid a `/proc` entry is named by, or nil when its name is not all digits.
    static func pid(named entry: UnsafeMutablePointer<dirent>) -> Int32? {
        withUnsafeBytes(of: entry.pointee.d_name) { name -> Int32? in
            var value: Int64 = 0
            var digits = 0
            for byte in name {
                if byte == 0 { break }
                guard byte >= 48, byte <= 57, digits < 10 else { return nil }
                value = value * 10 + Int64(byte - 48)
                digits += 1
            }
            return digits > 0 && value <= Int64(Int32.max) ? Int32(value) : nil
        }
    }

    /// The `Uid:` line of `/proc/PID/status` (read whole into `buffer`, `ProcFile.read`),
    /// or nil when it cannot be read or has none.
    static func uidLine(of pid: Int32, buffer: inout [UInt8]) -> String? {
        guard let length = ProcFile.read("/proc/\(pid)/status", into: &buffer) else { return nil }
        return buffer.withUnsafeBufferPointer { bytes -> String? in
            var start = 0
            while start < length {
                var end = start
                while end < length && bytes[end] != 10 { end += 1 }
                // "Uid:"
                if end - start >= 4, bytes[start] == 85, bytes[start + 1] == 105, bytes[start + 2] == 100, bytes[start + 3] == 58 {
                    return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
                }
                start = end + 1
            }
            return nil
        }
    }

    /// True while any thread of `pid` is neither a zombie nor dead.
    package static func isRunning(_ pid: Int32) -> Bool {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return false }
        return tasks.contains { tid in
            guard let stat = ProcFile.read("/proc/\(pid)/task/\(tid)/stat"),
                let state = ProcessOwnership.state(stat: stat)
            else { return false }
            return ProcessOwnership.isRunning(state: state)
        }
    }
}

/// Processes of the user that were still running when the terminator's passes ran out:
/// the lock is not complete while they may still hold the vault.
public struct ProcessesSurvived: Error, Sendable, CustomStringConvertible {
    public var uid: UInt32
    public var pids: [Int32]

    package init(uid: UInt32, pids: [Int32]) {
        self.uid = uid
        self.pids = pids
    }

    public var description: String {
        "\(pids.count) process(es) of uid \(uid) could not be ended (pid \(pids.map(String.init).joined(separator: ", ")) still running after SIGKILL); they may still read the vault"
    }
}

extension VaultProtecting {
    /// Locks the vault of `uid`, ending all of her processes when `terminator` is given:
    /// first, before the vault is opened at all (so that a vault that cannot be opened, or
    /// a filesystem of hers that stalls the opening, does not spare them), then again
    /// where the protection ends holders (what she started meanwhile). Returns the pids
    /// ended; throws the lock's error, or `ProcessesSurvived` when some could not be ended.
    package func lock(_ vaults: [VaultDirectory], uid: UInt32, ending terminator: ProcessTerminator?) throws -> [Int32] {
        var ended = Set<Int32>()
        var survivors: [Int32] = []
        func end() -> [Int32] {
            guard let terminator else { return [] }
            let outcome = terminator.terminate(uid: uid)
            ended.formUnion(outcome.ended)
            survivors = outcome.survivors
            return outcome.ended
        }
        _ = end()
        try lock(vaults, uid: uid, endHolders: end)
        guard survivors.isEmpty else { throw ProcessesSurvived(uid: uid, pids: survivors) }
        return ended.sorted()
    }
}
