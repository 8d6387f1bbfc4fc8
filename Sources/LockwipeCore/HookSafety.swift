/// Whether a hook, or the directory holding it, is safe to run as root: the rule of
/// OpenSSH's StrictModes applied to executables. A hook runs with the daemon's rights, so
/// anyone who can replace it, or rename something into its directory, gets those rights.
public enum HookSafety {
    /// Why a file or directory with this owner and mode (`st_mode`, type bits included)
    /// must not be trusted; nil when it may. `expectedOwner` is the daemon's effective uid
    /// (root when installed); root's files are trusted by any daemon.
    public static func problem(owner: UInt32, mode: UInt32, expectedOwner: UInt32, isDirectory: Bool) -> String? {
        let type = mode & 0o170000
        if !isDirectory && type == 0o120000 { return "is a symlink (a hook must be the file itself)" }
        if isDirectory && type != 0o040000 { return "is not a directory" }
        if !isDirectory && type != 0o100000 { return "is not a regular file" }
        // Root's files are safe for anyone; an unprivileged daemon (tests) may also run its own.
        if owner != 0 && owner != expectedOwner {
            return "is owned by uid \(owner), not by root\(expectedOwner == 0 ? "" : " or uid \(expectedOwner)")"
        }
        if mode & 0o022 != 0 {
            let who = [mode & 0o020 != 0 ? "its group" : nil, mode & 0o002 != 0 ? "others" : nil].compactMap { $0 }
            return "is writable by \(who.joined(separator: " and ")) (mode \(String(mode & 0o7777, radix: 8)))"
        }
        return nil
    }
}
