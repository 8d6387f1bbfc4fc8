import Foundation
import LockwipeBase
import LockwipeCore

/// The cryptographic lock of an encrypted vault: its fscrypt v2 key is removed from the
/// kernel for all users, so what is left on disk is ciphertext (names and contents) that
/// not even root can read; unlock adds the key again (unwrapped by the caller from the
/// user's passcode or the machine key).
///
/// The key is found from each directory's own encryption policy (the kernel's key
/// identifier), read from the recorded inode opened by `VaultPath.open`, so lock needs
/// nothing from the store and start-up can re-apply it. Key operations use the descriptor
/// on the vault's parent that the same walk opened (checked to be on the vault's
/// filesystem): one inside the vault would itself keep the key in use. The daemon holds no
/// descriptor inside a vault while it locks (the policy is read and the descriptor closed
/// first). A lock is verified from the key itself: its status must be absent for all users.
public struct FscryptLock: VaultProtecting {
    /// How often removal is retried after the holders were ended (their descriptors close
    /// asynchronously as the processes exit).
    var attempts = 5

    public init() {}

    public var kind: Protection { .encrypted }

    /// Nothing to record: owner and mode are never changed, only the key goes.
    public func recordState(of directories: [VaultDirectory], user: String) throws -> [LockRecord] { [] }

    public func lock(_ directories: [VaultDirectory]) throws {
        try lock(directories, uid: 0, endHolders: { [] })
    }

    /// Ends the holders, removes the key, and, while the kernel reports files still busy,
    /// ends holders again and retries; then verifies with the key-status ioctl. A key that
    /// stays in use (files held open by processes that were not ended) is an error: the
    /// lock is committed and start-up retries it, but nobody is told it is complete.
    public func lock(_ directories: [VaultDirectory], uid: UInt32, endHolders: () -> [Int32]) throws {
        _ = endHolders()
        for directory in directories {
            let (id, parent) = try Self.keyIdentifier(of: directory)
            defer { close(parent) }
            try removeKey(id, parent: parent, path: directory.path, endHolders: endHolders)
        }
    }

    /// Removes the key until the kernel says it is absent, ending holders between tries.
    private func removeKey(_ id: Fscrypt.KeyIdentifier, parent: Int32, path: String, endHolders: () -> [Int32]) throws {
        var attempt = 0
        while try Fscrypt.status(of: id, fd: parent, path: path) != .absent {
            attempt += 1
            if attempt > attempts {
                throw FileSystemError(
                    "remove the encryption key of", path + " (files in it are still open by processes that were not ended; they keep it readable until closed)",
                    code: EBUSY)
            }
            let removal: Fscrypt.Removal
            do {
                removal = try Fscrypt.removeKey(id, fd: parent, path: path)
            } catch {
                // ENOKEY: removed meanwhile (another directory of the vault on this filesystem).
                if error.code != ENOKEY { throw error }
                continue
            }
            if removal == .filesBusy {
                _ = endHolders()
                usleep(UInt32(100_000 * attempt))
            }
        }
    }

    /// Adds the key on each directory's filesystem and checks it is the directory's key
    /// and present.
    public func unlock(_ records: [LockRecord], directories: [VaultDirectory], key: [UInt8]?) throws {
        guard let key else { throw FileSystemError("unlock", "an encrypted vault without its key", code: ENOKEY) }
        for directory in directories {
            let path = directory.path
            let (id, parent) = try Self.keyIdentifier(of: directory)
            defer { close(parent) }
            let added = try Fscrypt.addKey(key, fd: parent, path: path)
            guard added == id else {
                _ = try? Fscrypt.removeKey(added, fd: parent, path: path)
                throw FileSystemError("unlock", path + " (the stored key is not this directory's key)", code: EKEYREJECTED)
            }
            guard try Fscrypt.status(of: id, fd: parent, path: path) == .present else {
                throw FileSystemError("verify the key of", path, code: ENOKEY)
            }
        }
    }

    /// True when every directory is the recorded inode and its key is absent from the
    /// kernel for all users. A vault that is missing or replaced is not locked.
    public func isLocked(_ directories: [VaultDirectory]) -> Bool {
        directories.allSatisfy { directory in
            guard let found = try? Self.keyIdentifier(of: directory) else { return false }
            let (id, parent) = found
            defer { close(parent) }
            return (try? Fscrypt.status(of: id, fd: parent, path: directory.path)) == .absent
        }
    }

    /// The key identifier of the recorded encrypted directory and an open descriptor on its
    /// parent on the same filesystem (the caller closes it). Refuses a vault that is missing
    /// or replaced, and a directory that is not encrypted (a vault must never silently
    /// become plaintext).
    static func keyIdentifier(of directory: VaultDirectory) throws -> (Fscrypt.KeyIdentifier, Int32) {
        let path = directory.path
        let opened = try VaultPath.open(directory)
        let policy: Fscrypt.KeyIdentifier?
        do {
            policy = try Fscrypt.policy(of: opened.fd, path: path)
        } catch {
            opened.close()
            throw error
        }
        // Only the parent stays open: a descriptor on the vault would keep its key in use.
        close(opened.fd)
        let parent = opened.parent
        guard let id = policy else {
            close(parent)
            throw FileSystemError("lock", path + " (it is not an encrypted directory)", code: ENODATA)
        }
        var st = stat()
        guard fstat(parent, &st) == 0, UInt64(st.st_dev) == opened.identity.device else {
            close(parent)
            throw FileSystemError("lock", path + " (its parent is on another filesystem: the key cannot be reached from it)", code: EXDEV)
        }
        return (id, parent)
    }

    // MARK: Creating vaults

    /// Why `path` cannot become an encrypted vault, or nil when it can: an existing
    /// directory must be empty, not yet encrypted, on a filesystem with fscrypt; a missing
    /// one is judged by its parent's filesystem.
    public static func encryptionProblem(_ path: String) -> String? {
        var fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        var judged = path
        if fd < 0 {
            guard errno == ENOENT else { return "\(path): \(String(cString: strerror(errno)))" }
            judged = (path as NSString).deletingLastPathComponent
            fd = open(judged, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else { return "\(path): cannot open its parent \(judged)" }
            defer { close(fd) }
            return Fscrypt.isSupported(fd: fd) ? nil : "\(path): its filesystem has no fscrypt (ext4 needs -O encrypt)"
        }
        defer { close(fd) }
        guard Fscrypt.isSupported(fd: fd) else { return "\(path): its filesystem has no fscrypt (ext4 needs -O encrypt)" }
        do {
            if try Fscrypt.policy(of: fd, path: path) != nil { return "\(path): is already encrypted (under a key lockwiped does not hold)" }
        } catch {
            return "\(error)"
        }
        guard let dir = fdopendir(dup(fd)) else { return "\(path): cannot read it" }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = String(cString: DirectoryEntry.name(of: entry))  // in place: see DirectoryEntry.name(of:)
            if name != "." && name != ".." { return "\(path): is not empty (only an empty or new directory can be encrypted)" }
        }
        return nil
    }

    /// Makes the empty recorded directory an fscrypt v2 directory under `key` (which stays
    /// added: the new vault is unlocked). Returns the key identifier.
    package static func encrypt(_ directory: VaultDirectory, key: [UInt8]) throws -> Fscrypt.KeyIdentifier {
        let opened = try VaultPath.open(directory)
        defer { opened.close() }
        return try Fscrypt.encrypt(emptyDirectory: opened.fd, path: directory.path, key: key)
    }

    /// Removes `id` from the filesystem of the recorded directory (undo of a registration),
    /// ignoring a key that is not there.
    package static func removeKey(_ id: Fscrypt.KeyIdentifier, near directory: VaultDirectory) -> String? {
        let opened: OpenedVault
        do {
            opened = try VaultPath.open(directory)
        } catch {
            return "cannot remove the key of \(directory.path): \(error)"
        }
        close(opened.fd)
        defer { close(opened.parent) }
        do {
            _ = try Fscrypt.removeKey(id, fd: opened.parent, path: directory.path)
        } catch {
            if error.code != ENOKEY { return "\(error)" }
        }
        return nil
    }
}
