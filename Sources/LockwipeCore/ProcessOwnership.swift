/// Which processes a lock ends: every process of the user, read from `/proc/PID/status`.
///
/// A process is hers when any of its four uids (real, effective, saved, filesystem: the
/// `Uid:` line) is hers: a process that kept one of them can take back the others, and
/// one whose filesystem uid is hers opens files as her. Where it runs (another mount
/// namespace, a vault bind-mounted elsewhere, descriptors parked in a socket) does not
/// matter. Root's processes are never hers, whatever the uid asked for.
public enum ProcessOwnership {
    /// The four uids of a `/proc/PID/status` text; nil when the `Uid:` line is missing
    /// or does not hold four numbers (the process is then not counted as anyone's).
    public static func uids(status: String) -> [UInt32]? {
        for line in status.split(separator: "\n") where line.hasPrefix("Uid:") {
            let fields = line.dropFirst(4).split(whereSeparator: { $0 == "\t" || $0 == " " })
            let uids = fields.compactMap { UInt32($0) }
            return uids.count == 4 && fields.count == 4 ? uids : nil
        }
        return nil
    }

    /// True when a process with this status text belongs to `uid` (never for uid 0).
    public static func belongs(status: String, to uid: UInt32) -> Bool {
        guard uid != 0, let uids = uids(status: status) else { return false }
        return uids.contains(uid)
    }

    /// True when a task in this `/proc/PID/task/TID/stat` state still runs code: not a
    /// zombie (`Z`) nor dead (`X`, `x`).
    public static func isRunning(state: Character) -> Bool {
        state != "Z" && state != "X" && state != "x"
    }

    /// The state letter of a `/proc/PID/stat` text: the first field after the command
    /// name's closing parenthesis (the name may itself hold parentheses and spaces).
    public static func state(stat: String) -> Character? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: close)...].first(where: { $0 != " " })
    }
}
