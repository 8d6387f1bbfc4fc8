import CLockwipeFS
import Foundation

/// The metrics file (`[metrics] textfile`): which paths may be one, and writing it so that
/// node_exporter's textfile collector never reads half of it.
enum MetricsTextfile {
    /// What is wrong with `path` as a metrics file name, if anything. node_exporter reads
    /// only `*.prom` files of its directory, and the file is replaced by a rename in that
    /// same directory, so the path must name a file in a directory.
    static func pathProblem(_ path: String) -> String? {
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
    static func directoryProblem(_ path: String) -> String? {
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
    /// it), made mode 0644 (whatever the umask), written whole, and renamed over `path`.
    /// The directory is opened once and every step acts through that descriptor. On any
    /// failure the temporary file is removed and `path` keeps its previous content.
    ///
    /// Not fsynced: the file is rewritten at every change and at start-up, and a reading
    /// lost in a crash costs nothing (its timestamp says how old the file is).
    static func write(_ text: String, to path: String) throws {
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
        var failure: FileSystemError? = fchmod(fd, 0o644) == 0 ? nil : FileSystemError("chmod", shown)
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
