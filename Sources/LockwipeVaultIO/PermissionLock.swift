import Foundation
import LockwipeBase
import LockwipeCore

/// How a vault is made unreadable and readable again: the permission lock, or the
/// fscrypt lock of an encrypted vault (`FscryptLock`). The Manager picks one per
/// registration by its `protection`.
///
/// Every method reaches each directory with `VaultPath.open` (the recorded device and
/// inode, no symlink anywhere on the way) and acts on that descriptor only. A directory
/// that is missing or is not the recorded inode is an error (`VaultOpenError`), never
/// "nothing to do": a vault its user renamed away is not locked, and is not reported so.
public protocol VaultProtecting: Sendable {
    var kind: Protection { get }
    /// What must be recorded before locking so that `unlock` can restore it exactly.
    func recordState(of directories: [VaultDirectory], user: String) throws -> [LockRecord]
    /// Makes every directory unreadable, and verifies it. Idempotent: start-up re-applies
    /// it to every locked registration, so a crash between commit and apply still ends locked.
    func lock(_ directories: [VaultDirectory]) throws
    /// True when every directory is the recorded inode and in its locked form.
    func isLocked(_ directories: [VaultDirectory]) -> Bool
    /// Locks the vault of `uid`; `endHolders` ends that user's processes holding it and
    /// returns their pids. The permission lock changes the directories first, then ends the
    /// holders (so that nothing reopens them); the fscrypt lock ends them first, since
    /// open files keep its key in use.
    func lock(_ directories: [VaultDirectory], uid: UInt32, endHolders: () -> [Int32]) throws
    /// Restores what was recorded; `key` is the vault key for a protection that needs one.
    func unlock(_ records: [LockRecord], directories: [VaultDirectory], key: [UInt8]?) throws
}

extension VaultProtecting {
    public func lock(_ directories: [VaultDirectory], uid: UInt32, endHolders: () -> [Int32]) throws {
        try lock(directories)
        _ = endHolders()
    }
}

/// The permission lock: owner and mode recorded, then `root:root 0000`. It stops every
/// user but root; the fscrypt lock stops root and disk thieves too.
///
/// Order matters against a user who loops `chmod 0777` on her vault: the owner goes first
/// (`fchown(0, 0)`: from then on only root may change the mode), then `fchmod(0)`, then
/// `fstat` must say `root:root 0000`, or the lock failed.
public struct PermissionLock: VaultProtecting {
    public init() {}

    public var kind: Protection { .permissions }

    public func recordState(of directories: [VaultDirectory], user: String) throws -> [LockRecord] {
        try directories.map { directory in
            let opened = try VaultPath.open(directory)
            defer { opened.close() }
            let st = opened.stat
            return LockRecord(path: directory.path, uid: st.st_uid, gid: st.st_gid, mode: UInt32(st.st_mode & 0o7777))
        }
    }

    public func lock(_ directories: [VaultDirectory]) throws {
        for directory in directories {
            let opened = try VaultPath.open(directory)
            defer { opened.close() }
            try Self.lock(fd: opened.fd, path: directory.path)
        }
    }

    /// `fchown(0, 0)`, `fchmod(0)`, then `fstat` must say `root:root 0000`.
    static func lock(fd: Int32, path: String) throws {
        guard fchown(fd, 0, 0) == 0 else { throw FileSystemError("chown root:root", path) }
        guard fchmod(fd, 0) == 0 else { throw FileSystemError("chmod 0000", path) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileSystemError("stat", path) }
        guard Self.isLockedForm(st) else {
            throw FileSystemError("verify the lock of", path + " (it is \(st.st_uid):\(st.st_gid) \(String(st.st_mode & 0o7777, radix: 8)) after locking)", code: EAGAIN)
        }
    }

    static func isLockedForm(_ st: stat) -> Bool {
        isLockedForm(owner: st.st_uid, group: st.st_gid, mode: UInt32(st.st_mode))
    }

    package static func isLockedForm(owner: UInt32, group: UInt32, mode: UInt32) -> Bool {
        (mode & 0o7777) == 0 && owner == 0 && group == 0
    }

    /// Restores owner and mode onto the recorded inode, and only while it is still in its
    /// locked form `root:root 0000`: a directory somebody else changed since the lock is
    /// left as it is (and said so in the error), never given away.
    public func unlock(_ records: [LockRecord], directories: [VaultDirectory], key: [UInt8]?) throws {
        for r in records {
            guard let directory = directories.first(where: { $0.path == r.path }) else { continue }
            let opened = try VaultPath.open(directory)
            defer { opened.close() }
            guard Self.isLockedForm(opened.stat) else {
                throw FileSystemError("unlock", r.path + " (it is no longer root:root 0000, so it is not the lock's doing; left as it is)", code: EPERM)
            }
            // Owner first: chown clears set-id bits, so the recorded mode is applied last.
            guard fchown(opened.fd, r.uid, r.gid) == 0 else { throw FileSystemError("chown \(r.uid):\(r.gid)", r.path) }
            guard fchmod(opened.fd, mode_t(r.mode)) == 0 else { throw FileSystemError("chmod \(String(r.mode, radix: 8))", r.path) }
        }
    }

    public func isLocked(_ directories: [VaultDirectory]) -> Bool {
        directories.allSatisfy { directory in
            guard let opened = try? VaultPath.open(directory) else { return false }
            defer { opened.close() }
            return Self.isLockedForm(opened.stat)
        }
    }
}
