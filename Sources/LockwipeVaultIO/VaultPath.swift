import CLockwipeFS
import Foundation
import LockwipeBase
import LockwipeCore

/// Reaching vault directories safely: the one function every action uses to open a vault
/// (`open`), the registration rule for where a vault may be (`ancestorProblems`), and the
/// creation of a new vault directory on a verified parent descriptor (`create`).
///
/// The walk is `chase()` with `CHASE_NO_SYMLINKS` (systemd's src/basic/chase.c): from a
/// descriptor on `/`, each component is opened with `openat(O_NOFOLLOW | O_DIRECTORY)`
/// relative to the previous one, so no symlink is followed anywhere in the path, and
/// `..` or `.` are refused.
package enum VaultPath {
    static let directoryFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC

    /// The components of an absolute path (`/a/b` → a, b). Throws for a relative path,
    /// `.`, `..` or the root itself.
    private static func components(_ path: String) throws(VaultOpenError) -> [String] {
        guard path.hasPrefix("/") else { throw .failed(path: path, component: path, code: EINVAL) }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !parts.isEmpty, !parts.contains("."), !parts.contains("..") else {
            throw .failed(path: path, component: path, code: EINVAL)
        }
        return parts
    }

    /// Opens `path` by walking from `/`, component by component, without following any
    /// symlink.
    static func walk(_ path: String) throws(VaultOpenError) -> OpenedVault {
        var ignored: [String] = []
        return try walk(path, checkAncestors: false, problems: &ignored)
    }

    /// Opens the last component of a recorded vault (fd, or -errno) without crossing into anything mounted
    /// on it (`RESOLVE_NO_XDEV`): a mount there is the vault only when it is the vault's own
    /// filesystem (the recorded device, not FUSE); anything else is `mountedOver`, and no
    /// call reaches the filesystem mounted there.
    private static func openVault(_ parent: Int32, _ name: String, path: String, expected: VaultDirectory.Identity) throws(VaultOpenError) -> Int32 {
        let fd = lockwipe_openat2(
            parent, name, UInt64(directoryFlags), lockwipe_resolve_no_xdev | lockwipe_resolve_no_symlinks | lockwipe_resolve_no_magiclinks)
        if fd >= 0 { return fd }
        guard fd == -EXDEV else { return fd }
        let top = MountTable.parse(mountInfo()).last { $0.mountPoint == path }
        guard let top, top.device == expected.device, !top.isFUSE else {
            throw .mountedOver(path: path, mount: top.map(\.description) ?? "a mount the mount table does not show")
        }
        let crossed = openat(parent, name, directoryFlags)
        return crossed >= 0 ? crossed : -errno
    }

    /// The daemon's mount table (`/proc/self/mountinfo`); empty when it cannot be read,
    /// which makes any mount on a vault `mountedOver` (fail closed).
    static func mountInfo() -> String {
        ProcFile.read("/proc/self/mountinfo") ?? ""
    }

    /// The walk; with `checkAncestors`, every directory opened on the way *before* the
    /// vault itself (the root and every ancestor) is judged by `ancestorProblem` and what
    /// is wrong is added to `problems`.
    static func walk(
        _ path: String, checkAncestors: Bool, problems: inout [String], expected: VaultDirectory.Identity? = nil
    ) throws(VaultOpenError) -> OpenedVault {
        let parts = try components(path)
        var current = Glibc.open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard current >= 0 else { throw .failed(path: path, component: "/", code: errno) }
        var currentPath = "/"
        for (i, name) in parts.enumerated() {
            if checkAncestors {
                var st = stat()
                guard fstat(current, &st) == 0 else {
                    let code = errno
                    close(current)
                    throw .failed(path: path, component: currentPath, code: code)
                }
                if let problem = ancestorProblem(fd: current, st, dir: currentPath, next: name, vault: path) { problems.append(problem) }
            }
            let componentPath = currentPath == "/" ? "/" + name : currentPath + "/" + name
            let last = i == parts.count - 1
            let next: Int32
            if last, let expected {
                do throws(VaultOpenError) {
                    next = try openVault(current, name, path: componentPath, expected: expected)
                } catch {
                    close(current)
                    throw error
                }
                if next < 0 { errno = -next }
            } else {
                next = openat(current, name, directoryFlags)
            }
            if next < 0 {
                let code = errno
                close(current)
                switch code {
                case ENOENT: throw .missing(path: path, component: componentPath)
                case ELOOP, ENOTDIR: throw .notADirectory(path: path, component: componentPath)
                default: throw .failed(path: path, component: componentPath, code: code)
                }
            }
            if i == parts.count - 1 {
                var st = stat()
                guard fstat(next, &st) == 0 else {
                    let code = errno
                    close(next)
                    close(current)
                    throw .failed(path: path, component: componentPath, code: code)
                }
                return OpenedVault(fd: next, parent: current, name: name, stat: st)
            }
            close(current)
            current = next
            currentPath = componentPath
        }
        close(current)
        throw .failed(path: path, component: path, code: EINVAL)  // unreachable: parts is not empty
    }

    /// Opens the recorded vault `directory`: the safe walk, then its device and inode must be
    /// the recorded ones. The one way every lock, unlock, unregister, wipe and key lookup
    /// reaches a vault.
    package static func open(_ directory: VaultDirectory) throws(VaultOpenError) -> OpenedVault {
        guard let expected = directory.identity else { throw .unrecorded(path: directory.path) }
        var ignored: [String] = []
        let opened = try walk(directory.path, checkAncestors: false, problems: &ignored, expected: expected)
        guard opened.identity == expected else {
            opened.close()
            throw .replaced(path: directory.path, expected: expected, found: opened.identity)
        }
        return opened
    }

    // MARK: Registration

    /// Why a vault may not be at `path` (empty when it may): OpenSSH StrictModes' rule
    /// (`auth_secure_path`) for every ancestor, from `/` to the vault's parent:
    /// - no ancestor is a symlink (the walk never follows one);
    /// - every ancestor is owned by root and is not writable by group or other;
    /// - except a sticky (`+t`) ancestor such as `/tmp` (1777): accepted only when the next
    ///   component inside it is owned by root, because the sticky bit then keeps others from
    ///   renaming or unlinking that component. The vault itself belongs to its user, so its
    ///   parent can never be a sticky, writable directory.
    /// The user's own home chain is not an exception: a user who owns an ancestor can move
    /// her vault away from a lock, or put a symlink where it was.
    /// When the vault exists it must be a directory (not a symlink); when it does not, its
    /// parent must exist (registration creates one level only).
    package static func ancestorProblems(_ path: String) -> [String] {
        var problems: [String] = []
        do {
            let opened = try walk(path, checkAncestors: true, problems: &problems)
            opened.close()
        } catch {
            switch error {
            case .missing(_, let component) where component == path:
                break  // A new vault: its parent passed the rule above; registration creates it.
            case .missing(_, let component):
                problems.append("\(path): \(component) does not exist (registration creates the vault directory, not its parents)")
            case .notADirectory(_, let component):
                problems.append(
                    component == path
                        ? "\(path): is a symlink or not a directory; register the real directory"
                        : "\(path): its ancestor \(component) is a symlink or not a directory; register the real path")
            default:
                problems.append("\(error)")
            }
        }
        return problems
    }

    /// What is wrong with the ancestor `dir` (open as `fd`, `st`) of the vault `vault`,
    /// whose next component on the way is `next`; nil when nothing is.
    private static func ancestorProblem(fd: Int32, _ st: stat, dir: String, next: String, vault path: String) -> String? {
        let owner = st.st_uid
        if owner != 0 {
            return "\(path): its ancestor \(dir) is owned by uid \(owner), not root; a vault must lie in directories only root can change"
        }
        guard st.st_mode & (S_IWGRP | S_IWOTH) != 0 else { return nil }
        guard st.st_mode & S_ISVTX != 0 else {
            return
                "\(path): its ancestor \(dir) is writable by group or other (mode \(String(st.st_mode & 0o7777, radix: 8))); a vault must lie in directories only root can change"
        }
        // Sticky: only the owner of `next` (or root) may rename or unlink it.
        var inner = stat()
        let last = (dir == "/" ? "/" : dir + "/") + next
        if fstatat(fd, next, &inner, AT_SYMLINK_NOFOLLOW) != 0 {
            return "\(path): \(last) would be created inside the sticky, world-writable \(dir) and owned by its user, who could rename it"
        }
        if inner.st_uid != 0 {
            return "\(path): \(last) is inside the sticky, world-writable \(dir) and owned by uid \(inner.st_uid), not root: its owner could rename it"
        }
        return nil
    }

    /// A vault directory as registration prepared it.
    package struct Prepared {
        package var directory: VaultDirectory
        /// Made by `create` (undo removes it).
        package var created = false
        /// It existed and was given to its user: the owner, group and mode it had (undo
        /// restores them, `restoreGiven`).
        package var given: (uid: UInt32, gid: UInt32, mode: UInt32)? = nil
    }

    /// Opens the vault directory `path`, creating it when missing: `mkdirat` on the verified
    /// parent descriptor, then the new directory is opened with `O_NOFOLLOW` relative to
    /// that same descriptor, checked to be a directory owned by root, and `fchown`ed and
    /// `fchmod`ed (0700) through the descriptor. No step resolves a path again, so nothing
    /// swapped into the parent between two steps can be chowned.
    ///
    /// A directory that exists is opened once by the same walk and judged by
    /// `ExistingVault.decide` on what its descriptor says (owner, mode, empty or not): kept,
    /// given to its user through that descriptor, or refused with the reason. So a vault
    /// registered `active` is one its user can use (a permission-mode wipe leaves it
    /// `root:root 0000`; registering it again gives it back), and nothing is ever chowned
    /// by path, nor recursively.
    package static func create(_ path: String, user: String = "its user", uid: UInt32, gid: UInt32) throws -> Prepared {
        var existing: OpenedVault?
        do throws(VaultOpenError) {
            existing = try walk(path)
        } catch {
            guard case .missing(_, let component) = error, component == path else { throw error }
        }
        if let opened = existing {
            defer { opened.close() }
            return try giveExisting(opened, path: path, user: user, uid: uid, gid: gid)
        }
        let parentPath = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        let parentOpened = try walk(parentPath)
        defer { parentOpened.close() }
        let parent = parentOpened.fd
        guard mkdirat(parent, name, 0o700) == 0 else { throw FileSystemError("mkdir", path) }
        let fd = openat(parent, name, directoryFlags)
        guard fd >= 0 else { throw FileSystemError("open the new directory", path) }
        defer { Glibc.close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileSystemError("stat", path) }
        guard st.st_uid == 0 else { throw FileSystemError("create", path + " (the new directory is not owned by root: it was replaced)", code: EPERM) }
        guard fchown(fd, uid, gid) == 0 else { throw FileSystemError("chown", path) }
        guard fchmod(fd, 0o700) == 0 else { throw FileSystemError("chmod 0700", path) }
        return Prepared(directory: VaultDirectory(path: path, identity: .init(st)), created: true)
    }

    /// The existing directory `opened`, kept, given to its user or refused (see `create`).
    private static func giveExisting(_ opened: OpenedVault, path: String, user: String, uid: UInt32, gid: UInt32) throws -> Prepared {
        let st = opened.stat
        let directory = VaultDirectory(path: path, identity: opened.identity)
        // Only root's directory is read (whether it is empty is all that matters there).
        let empty = st.st_uid == 0 ? try isEmpty(opened.fd, path: path) : false
        let decision = ExistingVault.decide(path: path, owner: st.st_uid, mode: UInt32(st.st_mode), isEmpty: empty, user: user, uid: uid)
        switch decision {
        case .keep:
            return Prepared(directory: directory)
        case .refuse(let reason):
            throw RegistrationRefusal(reason)
        case .take(let mode):
            // Owner first, then the mode. Her own directory keeps its group (a shared group's
            // 2750 vault); root's gets her group, as a created vault does.
            guard st.st_uid == uid || fchown(opened.fd, uid, gid) == 0 else { throw FileSystemError("give the directory to \(user) (chown)", path) }
            guard fchmod(opened.fd, mode_t(mode)) == 0 else { throw FileSystemError("give the directory to \(user) (chmod \(String(mode, radix: 8)))", path) }
            return Prepared(directory: directory, given: (st.st_uid, st.st_gid, UInt32(st.st_mode & 0o7777)))
        }
    }

    /// Whether the directory open as `fd` holds no entry (read through a descriptor of its own).
    static func isEmpty(_ fd: Int32, path: String) throws -> Bool {
        let own = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard own >= 0 else { throw FileSystemError("read", path) }
        guard let stream = fdopendir(own) else {
            Glibc.close(own)
            throw FileSystemError("read", path)
        }
        defer { closedir(stream) }
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { return false }
        }
        return true
    }

    /// Undoes `create`'s gift of an existing directory (a registration that failed later):
    /// the owner, group and mode it had, on the recorded inode only, and only while it is
    /// still as `create` left it (its user's).
    package static func restoreGiven(_ directory: VaultDirectory, uid user: UInt32, to previous: (uid: UInt32, gid: UInt32, mode: UInt32)) -> String? {
        do {
            let opened = try open(directory)
            defer { opened.close() }
            guard opened.stat.st_uid == user else { return "\(directory.path): not restored to uid \(previous.uid): it is no longer its user's" }
            guard fchown(opened.fd, previous.uid, previous.gid) == 0, fchmod(opened.fd, mode_t(previous.mode)) == 0 else {
                return "could not give \(directory.path) back to uid \(previous.uid): \(String(cString: strerror(errno)))"
            }
            return nil
        } catch {
            return "could not give \(directory.path) back to uid \(previous.uid): \(error)"
        }
    }

    /// Removes a directory `create` made (undo of a registration): only that inode, only
    /// when empty.
    package static func removeCreated(_ directory: VaultDirectory) -> String? {
        do {
            let opened = try open(directory)
            defer { opened.close() }
            guard unlinkat(opened.parent, opened.name, AT_REMOVEDIR) == 0 else {
                return "could not remove \(directory.path): \(String(cString: strerror(errno)))"
            }
            return nil
        } catch {
            return "could not remove \(directory.path): \(error)"
        }
    }
}
