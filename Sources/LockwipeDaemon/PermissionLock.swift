import Foundation
import LockwipeCore

/// How a vault is made unreadable and readable again: the permission lock, or the
/// fscrypt lock of an encrypted vault (`FscryptLock`). The Manager picks one per
/// registration by its `protection`.
public protocol VaultProtecting: Sendable {
    var kind: Protection { get }
    /// What must be recorded before locking so that `unlock` can restore it exactly.
    func recordState(of directories: [String], user: String) throws -> [LockRecord]
    /// Makes every directory unreadable. Idempotent: start-up re-applies it to every locked
    /// registration, so a crash between commit and apply still ends locked.
    func lock(_ directories: [String]) throws
    /// Restores what was recorded.
    func unlock(_ records: [LockRecord]) throws
    /// True when every directory is in its locked form (for verification and status).
    func isLocked(_ directories: [String]) -> Bool
    /// Locks the vault of `uid`; `endHolders` ends that user's processes holding it and
    /// returns their pids. The permission lock changes the directories first, then ends the
    /// holders (so that nothing reopens them); the fscrypt lock ends them first, since
    /// open files keep its key in use.
    func lock(_ directories: [String], uid: UInt32, endHolders: () -> [Int32]) throws
    /// Restores what was recorded; `key` is the vault key for a protection that needs one.
    func unlock(_ records: [LockRecord], directories: [String], key: [UInt8]?) throws
}

extension VaultProtecting {
    public func lock(_ directories: [String], uid: UInt32, endHolders: () -> [Int32]) throws {
        try lock(directories)
        _ = endHolders()
    }

    public func unlock(_ records: [LockRecord], directories: [String], key: [UInt8]?) throws {
        try unlock(records)
    }
}

/// The permission lock: owner and mode recorded, then `root:root 0000`. It stops every
/// user but root; the fscrypt lock stops root and disk thieves too.
///
/// Directories are changed through a descriptor opened with `O_NOFOLLOW`, so a vault
/// swapped for a symlink is refused instead of chown'ing whatever the link points to.
public struct PermissionLock: VaultProtecting {
    public init() {}

    public var kind: Protection { .permissions }

    public func recordState(of directories: [String], user: String) throws -> [LockRecord] {
        try directories.compactMap { path in
            var st = stat()
            if lstat(path, &st) != 0 {
                if errno == ENOENT { return nil }  // gone (e.g. removed by its user): nothing to lock
                throw FileSystemError("stat", path)
            }
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                throw FileSystemError("lock", path, code: ENOTDIR)
            }
            return LockRecord(path: path, uid: st.st_uid, gid: st.st_gid, mode: UInt32(st.st_mode & 0o7777))
        }
    }

    public func lock(_ directories: [String]) throws {
        for path in directories {
            let fd: Int32
            do {
                fd = try openDirectoryNoFollow(path)
            } catch let error as FileSystemError where error.code == ENOENT {
                continue
            }
            defer { close(fd) }
            guard fchmod(fd, 0) == 0 else { throw FileSystemError("chmod 0000", path) }
            guard fchown(fd, 0, 0) == 0 else { throw FileSystemError("chown root:root", path) }
        }
    }

    public func unlock(_ records: [LockRecord]) throws {
        for r in records {
            let fd: Int32
            do {
                fd = try openDirectoryNoFollow(r.path)
            } catch let error as FileSystemError where error.code == ENOENT {
                continue
            }
            defer { close(fd) }
            // Owner first: chown clears set-id bits, so the recorded mode is applied last.
            guard fchown(fd, r.uid, r.gid) == 0 else { throw FileSystemError("chown \(r.uid):\(r.gid)", r.path) }
            guard fchmod(fd, mode_t(r.mode)) == 0 else { throw FileSystemError("chmod \(String(r.mode, radix: 8))", r.path) }
        }
    }

    public func isLocked(_ directories: [String]) -> Bool {
        directories.allSatisfy { path in
            var st = stat()
            guard lstat(path, &st) == 0 else { return errno == ENOENT }
            return (st.st_mode & 0o7777) == 0 && st.st_uid == 0 && st.st_gid == 0
        }
    }
}
