/// The rules a vault directory must satisfy before the daemon will ever lock or wipe it,
/// on path strings alone (the daemon adds the checks that need the filesystem, such as
/// "is not a symlink"). They exist because a wipe runs as root: a registration of `/etc`
/// or of a parent of another user's vault must be impossible.
public enum DirectoryRules {
    /// Directories that may never be a vault, nor contain one.
    public static let systemRoots: [String] = [
        "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
        "/run", "/sbin", "/sys", "/usr",
    ]
    /// Directories that may contain vaults but never be one themselves.
    public static let protectedParents: [String] = [
        "/", "/home", "/media", "/mnt", "/opt", "/root", "/srv", "/tmp", "/var", "/var/lib",
        "/var/tmp", "/var/cache", "/var/log", "/var/spool",
    ]
    /// Where other programs and root keep their own data: no vault lies in them unless the
    /// operator allows a directory there (`[vault] allow_under`). A registration of
    /// `/var/lib/postgresql` would otherwise let a wipe take a database with it.
    public static let guardedAreas: [String] = [
        "/opt", "/root", "/var/cache", "/var/lib", "/var/log", "/var/spool",
    ]

    /// `path` with "." and empty components removed and no trailing slash; nil when it is
    /// not absolute or contains "..", which would make the rules meaningless.
    public static func normalize(_ path: String) -> String? {
        guard path.hasPrefix("/") else { return nil }
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == ".." { return nil }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// True when `a` is `b` or lies inside it (component-wise, "/srv/ab" is not in "/srv/a").
    public static func isWithin(_ a: String, _ b: String) -> Bool {
        if b == "/" { return true }
        return a == b || a.hasPrefix(b + "/")
    }

    /// Whether `scalar` is a control character: C0 (U+0000 to U+001F: newline, tab,
    /// escape, ...), DEL (U+007F) or C1 (U+0080 to U+009F, which some terminals obey as
    /// escape sequences). None of them belongs in a path or name a person reads.
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// `text` with each control character written as an escape (`\n`, `\t`, `\r`, else
    /// `\u{1B}`), so that a message can name it without breaking a line or a terminal.
    public static func visible(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case _ where isControl(scalar): out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Why `text`, given as `field` ("directory", "user name"), is refused at registration;
    /// nil when it holds no control character. A path or name with one would break every
    /// line it is shown on (history, status, the journal's stderr form, a dry-run) and the
    /// newline-separated `LOCKWIPE_DIRECTORIES` of hooks.
    public static func controlCharacterProblem(field: String, _ text: String) -> String? {
        guard let first = text.unicodeScalars.first(where: isControl) else { return nil }
        let hex = String(first.value, radix: 16, uppercase: true)
        let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        let name = first == "\n" ? "a newline, " : first == "\t" ? "a tab, " : ""
        return "\(field) \"\(visible(text))\" contains a control character (\(name)\(code)); "
            + "control characters are refused in paths and names: rename it and register again"
    }

    /// Every problem with `path` as a new vault directory, given the directories that other
    /// registrations (and the daemon itself) already own and the directories the operator
    /// allows inside the guarded areas (normalized).
    public static func problems(path: String, taken: [(owner: String, path: String)], allowedUnder: [String] = []) -> [String] {
        // First, and alone: every other message would print the path as it is.
        if let problem = controlCharacterProblem(field: "directory", path) { return [problem] }
        guard let p = normalize(path) else {
            return ["\(path): must be an absolute path without '..'"]
        }
        var found: [String] = []
        if let root = systemRoots.first(where: { isWithin(p, $0) }) {
            found.append("\(p): lies in the system directory \(root)")
        } else if protectedParents.contains(p) {
            found.append("\(p): is a system directory; register a directory inside it")
        } else if let area = guardedAreas.first(where: { isWithin(p, $0) }), !allowedUnder.contains(where: { isWithin(p, $0) }) {
            found.append(
                "\(p): lies in \(area), where programs and root keep their own data; "
                    + "allow it with [vault] allow_under = [\"\(p)\"] if it really is a vault")
        }
        for other in taken where isWithin(p, other.path) || isWithin(other.path, p) {
            found.append("\(p): overlaps \(other.path) of \(other.owner)")
        }
        return found
    }

    /// Why `path` cannot be an `allow_under` entry; nil when it can.
    public static func allowanceProblem(_ path: String) -> String? {
        guard let p = normalize(path), p == path || p + "/" == path else {
            return "\"\(path)\" must be an absolute path without '.', '..' or repeated slashes"
        }
        if let root = systemRoots.first(where: { isWithin(p, $0) }) { return "\(p) lies in the system directory \(root), where no vault may ever be" }
        if protectedParents.contains(p) { return "\(p) is a system directory; name a directory inside it" }
        guard guardedAreas.contains(where: { isWithin(p, $0) }) else {
            return "\(p) is not in \(guardedAreas.joined(separator: ", ")); vaults there need no allowance"
        }
        return nil
    }
}

/// What registration does with a vault directory that already exists, so that `active`
/// always means its user can use it: keep it, give it to her (through its descriptor), or
/// refuse, saying why. A permission-mode wipe leaves the directory `root:root 0000` and
/// empty: registering it again gives it back.
public enum ExistingVault: Sendable, Equatable {
    /// Hers already, with her read, write and search bits.
    case keep
    /// Give it to her: owner her uid and group, this mode.
    case take(mode: UInt32)
    case refuse(String)

    /// `owner` and `mode` (permission bits) are the directory's, `isEmpty` whether it holds
    /// no entry; `user`/`uid` the account being registered.
    public static func decide(path: String, owner: UInt32, mode: UInt32, isEmpty: Bool, user: String, uid: UInt32) -> ExistingVault {
        let permissions = mode & 0o7777
        if owner == uid {
            // Her own directory: she could fix the mode herself, but `active` should not wait for it.
            return permissions & 0o700 == 0o700 ? .keep : .take(mode: permissions | 0o700)
        }
        if owner == 0 {
            // Root's: an administrator registers it for her. Empty (as a wipe leaves it,
            // `root:root 0000`), it becomes hers as a created vault would (0700). With content,
            // only the directory itself becomes hers (its mode kept, her bits added): what is
            // inside stays as it is, never chowned recursively.
            return .take(mode: isEmpty ? 0o700 : permissions | 0o700)
        }
        return .refuse(
            "\(path): belongs to uid \(owner), not to \(user) (uid \(uid)); registration never takes a directory from another account: "
                + "give it to \(user) (chown) if it is hers, or register another directory")
    }
}
