import CLockwipeFS
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
/// First SIGTERM to every process found, scan after scan, until none is left or `grace`
/// has passed. Then, pass after pass until a scan of `/proc` finds no process of hers:
/// - **all at once, as her**: a child becomes her uid and calls `kill(-1, SIGKILL)`
///   (`lockwipe_spawn_signal_as`). The kernel signals every process she may signal under
///   one lock, and a fork racing it fails, so a fork-and-exit chain cannot outrun it; a
///   scan-then-signal by pid could (each pid read was gone when signalled, and the scan
///   found none: issue 40, finding 3). With a client to spare (her own lock), SIGSTOP
///   instead: everything of hers is frozen, the others are killed one by one, and the
///   client is let go on;
/// - **one by one, by pidfd**, every process the scan finds: those `kill(-1)` cannot
///   reach (only their effective or filesystem uid is hers). A pid is signalled through a
///   pidfd opened before its owner is checked, so a pid reused by another account's
///   process between the scan and the signal is never signalled.
/// The verifying scan decides: processes of hers still running when the passes run out
/// (in an uninterruptible wait) are the outcome's survivors, and a lock with survivors is
/// not complete.
public struct ProcessTerminator: Sendable {
    public var grace: TimeInterval
    /// How long the SIGSTOP/SIGKILL passes may take after the grace, and how many there may be.
    public var limit: TimeInterval = 10
    public var passes = 200
    /// A process left alone: the client whose request ends its own user's processes (her
    /// own lock or wipe), so that it can read the answer
    /// (the daemon ends it afterwards).
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
        // The spared client, named by a descriptor from now on: it is let go on after a
        // freeze, and its pid is never confused with a process that reuses it.
        let sparedFD = spared.map { lockwipe_pidfd_open($0) } ?? -1
        defer { if sparedFD >= 0 { close(sparedFD) } }
        var signalled = Set<Int32>()
        let graceEnd = Date().addingTimeInterval(grace)
        // Counted as well as timed: under a frozen (faked) clock the grace still ends.
        var waits = 0
        while true {
            let found = processes()
            if found.isEmpty { break }
            waits += 1
            if Date() >= graceEnd || Double(waits) > grace * 20 + 1 { break }
            for pid in found where !signalled.contains(pid) { Self.signal(pid, SIGTERM, ifOf: uid) }
            signalled.formUnion(found)
            usleep(50_000)
        }
        let end = Date().addingTimeInterval(limit)
        var pass = 0
        var aborted = Set<UInt32>()
        while true {
            let found = processes()
            // The first pass runs whatever the scan saw: every scan can miss a chain of
            // processes that each live a millisecond, and kill(-1) cannot.
            if found.isEmpty && (pass > 0 || only != nil) { return Outcome(ended: signalled.sorted(), survivors: []) }
            pass += 1
            if pass > passes || Date() >= end { return Outcome(ended: signalled.sorted(), survivors: found) }
            // Still there after a SIGKILL: a process in an uninterruptible FUSE wait, whose
            // server she killed while a descriptor of its /dev/fuse stays open (in the
            // waiter itself, say). Her FUSE connections are aborted: the wait ends, and
            // the SIGKILL with it (issue 40, finding 2).
            if pass > 1, only == nil { aborted.formUnion(Self.abortFUSEConnections(of: uid, seenBy: found, except: aborted)) }
            // Still there after that: its filesystem may be in no mount table at all (she
            // detached it lazily, and the waiter keeps the connection). Connections no
            // mount namespace shows are aborted, whoever made them: the last resort while
            // a process holds the lock hostage, and nothing mounted anywhere loses its
            // filesystem by it.
            if pass > 2, only == nil { aborted.formUnion(Self.abortOrphanFUSEConnections(except: aborted)) }
            if only == nil {
                // All of hers at once; with a client to spare, frozen first.
                Self.signalAll(of: uid, spared == nil ? SIGKILL : SIGSTOP)
            }
            let remaining = only == nil ? processes() : found
            for pid in Set(found).union(remaining) { Self.signal(pid, SIGKILL, ifOf: uid) }
            signalled.formUnion(found)
            signalled.formUnion(remaining)
            if sparedFD >= 0 { _ = lockwipe_pidfd_send_signal(sparedFD, SIGCONT) }
            usleep(20_000)
        }
    }

    /// `sig` to every process `uid` may signal, at once, from a child that is her
    /// (`lockwipe_spawn_signal_as`), waited for at most a second: as her process, she may
    /// stop or kill it, and then it is killed and the pass's scan finds what it missed.
    /// False when it did not run to its end.
    @discardableResult
    static func signalAll(of uid: UInt32, _ sig: Int32) -> Bool {
        let child = lockwipe_spawn_signal_as(uid, 65_534, sig)
        guard child > 0 else { return false }
        let fd = lockwipe_pidfd_open(child)
        if fd >= 0 {
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            var waited = 0
            while poll(&ready, 1, 1_000) < 0 && errno == EINTR && waited < 3 { waited += 1 }
            if ready.revents == 0 { kill(child, SIGKILL) }
            close(fd)
        } else {
            kill(child, SIGKILL)
        }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        // Exited (not killed by a signal) with status 0.
        return status & 0x7F == 0 && (status >> 8) & 0xFF == 0
    }

    /// Aborts the FUSE connections of filesystems `uid` mounted (`user_id=`), as the mount
    /// tables of `pids` (her namespaces) and of lockwiped show them, but those in
    /// `except`; returns the connections aborted. Every request on them fails at once, in
    /// every namespace. Her FUSE servers are ended anyway, so nothing that still works is
    /// cut off; without fusectl (`/sys/fs/fuse/connections`) nothing is aborted.
    static func abortFUSEConnections(of uid: UInt32, seenBy pids: [Int32], except: Set<UInt32>) -> Set<UInt32> {
        var minors = Set<UInt32>()
        for path in pids.map({ "/proc/\($0)/mountinfo" }) + ["/proc/self/mountinfo"] {
            guard let text = ProcFile.read(path) else { continue }
            for mount in MountTable.parse(text) where mount.fuseOwner == uid { minors.insert(mount.minor) }
        }
        return Set(minors.subtracting(except).filter { VaultMountTakeback.abortFUSEConnection(minor: $0) })
    }

    /// Aborts the FUSE connections (fusectl's directories) that no mount table of any mount
    /// namespace shows, but those in `except`; returns those aborted. Each namespace's
    /// table is read once, through one of its processes.
    static func abortOrphanFUSEConnections(except: Set<UInt32>) -> Set<UInt32> {
        guard let connections = try? FileManager.default.contentsOfDirectory(atPath: "/sys/fs/fuse/connections") else { return [] }
        var mounted = Set<UInt32>()
        var namespaces = Set<String>()
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where entry.allSatisfy(\.isNumber) {
            guard let ns = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(entry)/ns/mnt"), namespaces.insert(ns).inserted,
                let text = ProcFile.read("/proc/\(entry)/mountinfo")
            else { continue }
            for mount in MountTable.parse(text) where mount.isFUSE && mount.major == 0 { mounted.insert(mount.minor) }
        }
        let orphans = Set(connections.compactMap(UInt32.init)).subtracting(mounted).subtracting(except)
        return Set(orphans.filter { VaultMountTakeback.abortFUSEConnection(minor: $0) })
    }

    /// `sig` to `pid` if it is still a process of `uid`: the pidfd is opened first and the
    /// owner checked after, so the signal reaches the process checked or none.
    static func signal(_ pid: Int32, _ sig: Int32, ifOf uid: UInt32) {
        let fd = lockwipe_pidfd_open(pid)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        guard let line = uidLine(of: pid, buffer: &buffer), ProcessOwnership.belongs(status: line, to: uid) else { return }
        _ = lockwipe_pidfd_send_signal(fd, sig)
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
