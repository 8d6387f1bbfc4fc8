import Foundation

/// Ends a user's processes that hold files open under a vault, so that a lock also cuts
/// off access through descriptors opened before it.
///
/// A process "holds" the vault when its working directory, root, or any open descriptor
/// resolves to a path inside one of the directories. Only processes whose real or
/// effective uid is the user's are ended: SIGTERM, then SIGKILL after `grace`.
public struct ProcessTerminator: Sendable {
    public var grace: TimeInterval

    public init(grace: TimeInterval) {
        self.grace = grace
    }

    /// Pids of `uid`'s processes holding anything under `directories`.
    public static func holders(uid: UInt32, directories: [String]) -> [Int32] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        let me = getpid()
        return entries.compactMap { Int32($0) }.filter { pid in
            pid != me && owner(of: pid).contains(uid) && holdsAny(pid: pid, directories: directories)
        }.sorted()
    }

    /// Real and effective uid from /proc/PID/status.
    static func owner(of pid: Int32) -> [UInt32] {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return [] }
        for line in status.split(separator: "\n") where line.hasPrefix("Uid:") {
            return line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().prefix(2).compactMap { UInt32($0) }
        }
        return []
    }

    static func holdsAny(pid: Int32, directories: [String]) -> Bool {
        var links = ["/proc/\(pid)/cwd", "/proc/\(pid)/root"]
        if let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") {
            links += fds.map { "/proc/\(pid)/fd/\($0)" }
        }
        for link in links {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: link) else { continue }
            let cleaned = target.hasSuffix(" (deleted)") ? String(target.dropLast(10)) : target
            if directories.contains(where: { cleaned == $0 || cleaned.hasPrefix($0 + "/") }) { return true }
        }
        return false
    }

    /// Ends the holders; returns the pids that were signalled.
    public func terminate(uid: UInt32, directories: [String]) -> [Int32] {
        let pids = Self.holders(uid: uid, directories: directories)
        guard !pids.isEmpty else { return [] }
        for pid in pids { kill(pid, SIGTERM) }
        let deadline = Date().addingTimeInterval(grace)
        var alive = pids
        while !alive.isEmpty, Date() < deadline {
            usleep(50_000)
            alive = alive.filter { Self.isAlive($0) }
        }
        for pid in alive { kill(pid, SIGKILL) }
        return pids
    }

    static func isAlive(_ pid: Int32) -> Bool {
        // A zombie still answers kill(0); its state in /proc says it is gone for our purpose.
        guard kill(pid, 0) == 0 else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        let state = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).first
        return state != "Z" && state != "X"
    }
}
