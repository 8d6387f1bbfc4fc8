import CLockwipeFS
import Foundation

/// One daemon per state directory: an exclusive lock on `lockwiped.lock` in it, taken
/// before the database is opened and before the control socket is bound, and held for
/// the life of the process (the descriptor is never closed; the kernel releases the lock
/// when the process ends, however it ends).
///
/// A classic process-associated `fcntl(F_SETLK)` lock, not an OFD lock or flock: then
/// `F_GETLK` names the holder's pid (an OFD lock's holder is reported as -1). The holder
/// also writes its pid into the file, for a holder in another pid namespace (where
/// `F_GETLK` reports 0) and for operators (`cat /var/lib/lockwipe/lockwiped.lock`).
/// Hooks and other children never inherit the lock (classic locks are not inherited by
/// fork, and the descriptor is close-on-exec).
public struct StateDirectoryLock: Sendable {
    public static let fileName = "lockwiped.lock"
    public let path: String
    let descriptor: Int32

    /// Why the lock could not be taken; the daemon exits 1 with this text.
    public enum Failure: Error, Sendable, CustomStringConvertible {
        /// Another process holds it: another lockwiped on the same state directory.
        case held(stateDirectory: String, lockFile: String, pid: Int32?)
        /// The state directory or the lock file cannot be created or opened.
        case cannotOpen(StateDirectoryAccess)

        public var description: String {
            switch self {
            case .held(let directory, let file, let pid):
                let who = pid.map { "another lockwiped (pid \($0))" } ?? "another lockwiped (pid unknown)"
                return
                    "\(who) is already running on the state directory \(directory) (it holds the lock on \(file)); only one lockwiped may run per state directory: stop that one first (systemctl stop lockwiped), or give this one its own --state-dir and --socket"
            case .cannotOpen(let access):
                return access.description
            }
        }
    }

    /// Creates the state directory (0700) if it is missing, opens or creates the lock
    /// file and locks it without waiting.
    public static func acquire(stateDirectory: String) throws(Failure) -> StateDirectoryLock {
        let file = stateDirectory + "/" + fileName
        do {
            try StateDirectoryAccess.makeDirectory(stateDirectory)
        } catch {
            throw .cannotOpen(error)
        }
        let fd = open(file, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw .cannotOpen(StateDirectoryAccess(operation: "open", path: file, stateDirectory: stateDirectory, code: errno))
        }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw .cannotOpen(StateDirectoryAccess(operation: "open", path: file, stateDirectory: stateDirectory, code: EINVAL, what: "is not a regular file"))
        }
        let locked = lockwipe_lock_whole_file(fd)
        if locked == -EAGAIN || locked == -EACCES {
            var pid: Int32 = 0
            let held = lockwipe_lock_holder(fd, &pid)
            var holder: Int32? = held == 1 && pid > 0 ? pid : nil
            if holder == nil { holder = readPID(fd) }
            close(fd)
            throw .held(stateDirectory: stateDirectory, lockFile: file, pid: holder)
        }
        guard locked == 0 else {
            close(fd)
            throw .cannotOpen(StateDirectoryAccess(operation: "lock", path: file, stateDirectory: stateDirectory, code: -locked))
        }
        // The pid for people and for a holder-query from another pid namespace; a failure
        // to write it changes nothing about the lock.
        let text = Array("\(getpid())\n".utf8)
        if ftruncate(fd, 0) == 0 { _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) } }
        return StateDirectoryLock(path: file, descriptor: fd)
    }

    private static func readPID(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        let text = String(decoding: buffer[0..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return Int32(text).flatMap { $0 > 0 ? $0 : nil }
    }
}

/// The state directory, or a file in it, cannot be created, opened or written: said in
/// the operator's words, naming the path, its owner and mode and who lockwiped runs as
/// when it is a question of permissions (never "damaged").
public struct StateDirectoryAccess: Error, Sendable, CustomStringConvertible {
    public var operation: String
    public var path: String
    public var stateDirectory: String
    public var code: Int32
    /// Replaces the errno text when set.
    public var what: String?

    public init(operation: String, path: String, stateDirectory: String, code: Int32, what: String? = nil) {
        self.operation = operation
        self.path = path
        self.stateDirectory = stateDirectory
        self.code = code
        self.what = what
    }

    public var isPermission: Bool { code == EACCES || code == EPERM || code == EROFS }

    public var description: String {
        let reason = what ?? String(cString: strerror(code))
        var text = "cannot \(operation) \(path): \(reason)"
        if isPermission {
            text += ": a permission problem, not damage"
            text += "; the state directory \(stateDirectory) is \(Self.ownerAndMode(stateDirectory))"
            if path != stateDirectory, let file = Self.ownerAndModeIfExists(path) { text += ", \(path) is \(file)" }
            text += ", and lockwiped runs as \(Self.processUser())"
            text +=
                code == EROFS
                ? "; the file system is read-only"
                : "; run lockwiped as root (as lockwiped.service does), or give it a state directory of its own with --state-dir"
        }
        return text
    }

    /// Creates `directory` and its missing parents with mode 0700 (parents 0755).
    static func makeDirectory(_ directory: String, mode: mode_t = 0o700) throws(StateDirectoryAccess) {
        var st = stat()
        if stat(directory, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFDIR else {
                throw StateDirectoryAccess(operation: "use", path: directory, stateDirectory: directory, code: ENOTDIR, what: "not a directory")
            }
            return
        }
        guard errno == ENOENT else { throw StateDirectoryAccess(operation: "open", path: directory, stateDirectory: directory, code: errno) }
        let parent = (directory as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != directory, parent != "/" {
            do { try makeDirectory(parent, mode: 0o755) } catch {
                throw StateDirectoryAccess(operation: error.operation, path: error.path, stateDirectory: directory, code: error.code, what: error.what)
            }
        }
        guard mkdir(directory, mode) == 0 || errno == EEXIST else {
            throw StateDirectoryAccess(operation: "create", path: directory, stateDirectory: directory, code: errno)
        }
    }

    static func ownerAndModeIfExists(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return "owned by \(userName(st.st_uid)) with mode \(String(format: "%04o", st.st_mode & 0o7777))"
    }

    static func ownerAndMode(_ path: String) -> String { ownerAndModeIfExists(path) ?? "not readable" }

    static func userName(_ uid: uid_t) -> String {
        if let pw = getpwuid(uid), let name = pw.pointee.pw_name { return "\(String(cString: name)) (uid \(uid))" }
        return "uid \(uid)"
    }

    static func processUser() -> String { userName(geteuid()) }
}
