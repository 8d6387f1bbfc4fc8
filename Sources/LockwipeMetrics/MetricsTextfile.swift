import CLockwipeFS
import Foundation
import LockwipeBase

/// Who may read the metrics file, and what it shows (`[metrics] mode`, `group`,
/// `user_labels`). The file lists every registration's user, uid, state and last contact,
/// which `status` shows an ordinary user only for her own: so it is not readable by
/// everyone unless the operator says so.
public struct MetricsFileOptions: Sendable, Equatable {
    /// The file's permission bits; never with write bits for group or others.
    public var mode: UInt32 = 0o640
    /// The group the file belongs to; nil: `defaultGroup` where it exists, else root's
    /// group (then only root reads it: never world-readable as a fallback).
    public var group: String?
    /// Label per-registration series with `user` and `uid`; false: with `registration`
    /// (the registration id) only.
    public var userLabels = true

    public init(mode: UInt32 = 0o640, group: String? = nil, userLabels: Bool = true) {
        self.mode = mode
        self.group = group
        self.userLabels = userLabels
    }

    /// The group Debian's prometheus-node-exporter runs as.
    public static let defaultGroup = "prometheus"

    /// "0640" or "640" as permission bits; nil for anything else (not octal, more than
    /// 4 digits, setuid/setgid/sticky bits).
    public static func parseMode(_ text: String) -> UInt32? {
        guard (3...4).contains(text.count), text.allSatisfy({ ("0"..."7").contains($0) }), let mode = UInt32(text, radix: 8) else { return nil }
        return mode <= 0o777 ? mode : nil
    }

    /// The mode as the configuration spells it ("0640").
    public static func modeText(_ mode: UInt32) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

/// The metrics file (`[metrics] textfile`): which paths may be one, and writing it so that
/// node_exporter's textfile collector never reads half of it.
package enum MetricsTextfile {
    /// The gid of the group named `name`, nil when there is no such group.
    package static func groupID(_ name: String) -> gid_t? {
        var entry = Glibc.group()
        var result: UnsafeMutablePointer<Glibc.group>? = nil
        var buffer = [CChar](repeating: 0, count: 16_384)
        while true {
            let rc = getgrnam_r(name, &entry, &buffer, buffer.count, &result)
            if rc == ERANGE, buffer.count < 1 << 20 {
                buffer = [CChar](repeating: 0, count: buffer.count * 4)
                continue
            }
            return rc == 0 && result != nil ? entry.gr_gid : nil
        }
    }

    /// The group the file is given: the configured one (which must exist: a missing group
    /// is an error, and the file is not written), else `MetricsFileOptions.defaultGroup`
    /// where it exists, else root's group.
    static func resolveGroup(_ options: MetricsFileOptions) throws(MetricsGroupMissing) -> (name: String, gid: gid_t) {
        if let name = options.group {
            guard let gid = groupID(name) else { throw MetricsGroupMissing(group: name) }
            return (name, gid)
        }
        if let gid = groupID(MetricsFileOptions.defaultGroup) { return (MetricsFileOptions.defaultGroup, gid) }
        return ("root", 0)
    }

    /// What `--check-config` says about the metrics file: where, readable by whom, and
    /// with which labels.
    package static func checkLine(path: String?, options: MetricsFileOptions) -> String {
        guard let path else { return "none ([metrics] textfile)" }
        let group: String
        if let name = options.group {
            group = "group \(name)"
        } else if groupID(MetricsFileOptions.defaultGroup) != nil {
            group = "group \(MetricsFileOptions.defaultGroup)"
        } else {
            group = "group root (there is no group \(MetricsFileOptions.defaultGroup): set [metrics] group to the group node_exporter runs as)"
        }
        let labels = options.userLabels ? "with user and uid labels" : "without user labels (by registration id)"
        return "written to \(path), mode \(MetricsFileOptions.modeText(options.mode)), \(group), \(labels)"
    }

    struct MetricsGroupMissing: Error, CustomStringConvertible {
        var group: String
        var description: String {
            "the group \"\(group)\" ([metrics] group) does not exist; the file is not written until it does (never readable by everyone instead)"
        }
    }

    /// What is wrong with `path` as a metrics file name, if anything. node_exporter reads
    /// only `*.prom` files of its directory, and the file is replaced by a rename in that
    /// same directory, so the path must name a file in a directory.
    package static func pathProblem(_ path: String) -> String? {
        let shown = "\"\(path.prefix(120))\""
        guard path.hasPrefix("/") else { return "must be an absolute path, not \(shown)" }
        if path.utf8.contains(0) { return "must not contain a NUL character" }
        guard let name = path.split(separator: "/", omittingEmptySubsequences: false).last, name.hasSuffix(".prom"), name.count > ".prom".count else {
            return "must name a file ending in .prom (node_exporter's textfile collector reads only *.prom files), not \(shown)"
        }
        return nil
    }

    /// The directory that holds `path`.
    static func directory(of path: String) -> String {
        let parent = path[..<(path.lastIndex(of: "/") ?? path.startIndex)]
        return parent.isEmpty ? "/" : String(parent)
    }

    /// Why the file cannot be written where `path` says, if it cannot: its directory is
    /// missing, not a directory, or not writable (read-only, or not ours) for this process.
    package static func directoryProblem(_ path: String) -> String? {
        let directory = directory(of: path)
        let fd: Int32
        do {
            fd = try openDirectory(directory)
        } catch {
            if error.code == ENOENT {
                return "the directory \(directory) does not exist (Debian's prometheus-node-exporter reads /var/lib/prometheus/node-exporter)"
            }
            if error.code == ENOTDIR { return "\(directory) is not a directory" }
            return "the directory \(directory) cannot be reached: \(String(cString: strerror(error.code)))"
        }
        defer { close(fd) }
        guard faccessat(fd, ".", W_OK | X_OK, 0) == 0 else {
            return "the directory \(directory) is not writable: \(String(cString: strerror(errno)))"
        }
        return nil
    }

    /// The metrics directory, reached without following a symlink anywhere on its path
    /// (`RESOLVE_NO_SYMLINKS`): Debian's node-exporter directory belongs to the
    /// `prometheus` user, who must not be able to send root's writes elsewhere.
    static func openDirectory(_ directory: String) throws(FileSystemError) -> Int32 {
        let fd = lockwipe_open_directory_no_symlinks(directory)
        guard fd >= 0 else { throw FileSystemError("open", directory, code: -fd) }
        return fd
    }

    /// Replaces the file at `path` with `text`, atomically: a temporary file is created in
    /// the same directory (its name does not end in `.prom`, so the collector never reads
    /// it) readable by root alone, given its group and mode (`options`, whatever the
    /// umask) through its descriptor, written whole, and renamed over `path`: the file is
    /// never readable by more than the configured readers, not even for a moment.
    /// The directory is opened once and every step acts through that descriptor. On any
    /// failure the temporary file is removed and `path` keeps its previous content.
    ///
    /// Not fsynced: the file is rewritten at every change and at start-up, and a reading
    /// lost in a crash costs nothing (its timestamp says how old the file is).
    static func write(_ text: String, to path: String, options: MetricsFileOptions = MetricsFileOptions()) throws {
        let group = try resolveGroup(options)
        let directory = directory(of: path)
        let name = String(path[path.index(after: path.lastIndex(of: "/")!)...])
        let dirFD = try openDirectory(directory)
        defer { close(dirFD) }
        let temporary = ".\(name).\(String(UInt64.random(in: 0...UInt64.max), radix: 16)).tmp"
        let fd = openat(dirFD, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FileSystemError("create", directory + "/" + temporary) }
        var renamed = false
        defer { if !renamed { unlinkat(dirFD, temporary, 0) } }
        let shown = directory + "/" + temporary
        var failure: FileSystemError? = fchown(fd, uid_t.max, group.gid) == 0 ? nil : FileSystemError("chown to group \(group.name)", shown)
        if failure == nil, fchmod(fd, mode_t(options.mode)) != 0 { failure = FileSystemError("chmod", shown) }
        if failure == nil {
            failure = Array(text.utf8).withUnsafeBytes { bytes -> FileSystemError? in
                var offset = 0
                while offset < bytes.count {
                    let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                    if n < 0 {
                        if errno == EINTR { continue }
                        return FileSystemError("write", shown)
                    }
                    offset += n
                }
                return nil
            }
        }
        // close reports what a network filesystem failed to store.
        if close(fd) != 0, failure == nil { failure = FileSystemError("close", shown) }
        if let failure { throw failure }
        guard renameat(dirFD, temporary, dirFD, name) == 0 else { throw FileSystemError("rename to", path) }
        renamed = true
    }
}
