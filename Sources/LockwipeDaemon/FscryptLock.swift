import Foundation
import LockwipeCore

/// The cryptographic lock of an encrypted vault: its fscrypt v2 key is removed from the
/// kernel for all users, so what is left on disk is ciphertext (names and contents) that
/// not even root can read; unlock adds the key again (unwrapped by the caller from the
/// user's passcode or the machine key).
///
/// The key is found from each directory's own encryption policy (the kernel's key
/// identifier), so lock needs nothing from the store and start-up can re-apply it.
/// Key operations use a descriptor on the vault's parent: one inside the vault would
/// itself keep the key in use. The daemon holds no descriptor inside a vault while it
/// locks (the policy is read and the descriptor closed first).
public struct FscryptLock: VaultProtecting {
    /// How often removal is retried after the holders were ended (their descriptors close
    /// asynchronously as the processes exit).
    var attempts = 5

    public init() {}

    public var kind: Protection { .encrypted }

    /// Nothing to record: owner and mode are never changed, only the key goes.
    public func recordState(of directories: [String], user: String) throws -> [LockRecord] { [] }

    public func lock(_ directories: [String]) throws {
        try lock(directories, uid: 0, endHolders: { [] })
    }

    /// Ends the holders, removes the key, and, while the kernel reports files still busy,
    /// ends holders again and retries; then verifies with the key-status ioctl. A key that
    /// stays in use (files held open by processes that were not ended) is an error: the
    /// lock is committed and start-up retries it, but nobody is told it is complete.
    public func lock(_ directories: [String], uid: UInt32, endHolders: () -> [Int32]) throws {
        _ = endHolders()
        for path in directories {
            guard let found = try Self.keyIdentifier(of: path) else { continue }
            defer { close(found.1) }
            try removeKey(found.0, parent: found.1, path: path, endHolders: endHolders)
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

    public func unlock(_ records: [LockRecord]) throws {
        throw FileSystemError("unlock", "an encrypted vault without its key", code: ENOKEY)
    }

    /// Adds the key on each directory's filesystem and checks it is the directory's key
    /// and present.
    public func unlock(_ records: [LockRecord], directories: [String], key: [UInt8]?) throws {
        guard let key else { try unlock(records); return }
        for path in directories {
            guard let found = try Self.keyIdentifier(of: path) else { continue }
            let (id, parent) = found
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

    public func isLocked(_ directories: [String]) -> Bool {
        directories.allSatisfy { path in
            let found: (Fscrypt.KeyIdentifier, Int32)?
            do {
                found = try Self.keyIdentifier(of: path)
            } catch {
                return false
            }
            guard let pair = found else { return true }
            let (id, parent) = pair
            defer { close(parent) }
            return (try? Fscrypt.status(of: id, fd: parent, path: path)) == .absent
        }
    }

    /// The key identifier of the encrypted directory `path` and an open descriptor on its
    /// parent (the caller closes it); nil when the directory is gone. Refuses a symlink,
    /// and a directory that is not encrypted (a vault must never silently become plaintext).
    static func keyIdentifier(of path: String) throws -> (Fscrypt.KeyIdentifier, Int32)? {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw FileSystemError("open", path)
        }
        let policy: Fscrypt.KeyIdentifier?
        do {
            policy = try Fscrypt.policy(of: fd, path: path)
            close(fd)
        } catch {
            close(fd)
            throw error
        }
        guard let id = policy else { throw FileSystemError("lock", path + " (it is not an encrypted directory)", code: ENODATA) }
        let parentPath = (path as NSString).deletingLastPathComponent
        let parent = open(parentPath.isEmpty ? "/" : parentPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard parent >= 0 else { throw FileSystemError("open", parentPath) }
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
            let name = String(cString: WipeRun.name(of: entry))  // in place: see WipeRun.name(of:)
            if name != "." && name != ".." { return "\(path): is not empty (only an empty or new directory can be encrypted)" }
        }
        return nil
    }

    /// Makes the empty directory `path` an fscrypt v2 directory under `key` (which stays
    /// added: the new vault is unlocked). Returns the key identifier.
    static func encrypt(_ path: String, key: [UInt8]) throws -> Fscrypt.KeyIdentifier {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw FileSystemError("open", path) }
        defer { close(fd) }
        return try Fscrypt.encrypt(emptyDirectory: fd, path: path, key: key)
    }

    /// Removes `id` from the filesystem of `path` (undo of a registration), ignoring a key
    /// that is not there.
    static func removeKey(_ id: Fscrypt.KeyIdentifier, near path: String) -> String? {
        let parentPath = (path as NSString).deletingLastPathComponent
        let parent = open(parentPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard parent >= 0 else { return "cannot open \(parentPath) to remove the key of \(path)" }
        defer { close(parent) }
        do {
            _ = try Fscrypt.removeKey(id, fd: parent, path: path)
        } catch {
            if error.code != ENOKEY { return "\(error)" }
        }
        return nil
    }
}
