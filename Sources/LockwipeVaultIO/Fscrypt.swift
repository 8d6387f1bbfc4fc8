import CLockwipeFS
import Foundation
import LockwipeBase

/// fscrypt v2 through the kernel's ioctls: what an encrypted vault is made of. A vault's
/// key lives in the kernel only while the vault is unlocked; removing it "for all users"
/// leaves ciphertext that not even root can read.
public enum Fscrypt {
    /// A raw fscrypt v2 key for AES-256-XTS: 512 bits.
    public static let keySize = 64

    /// The kernel's name for a key, derived from the key itself.
    public struct KeyIdentifier: Hashable, Sendable, CustomStringConvertible {
        public var bytes: [UInt8]
        public init(bytes: [UInt8]) { self.bytes = bytes }
        public var description: String { bytes.map { String(format: "%02x", $0) }.joined() }
    }

    public enum KeyStatus: Sendable, Equatable {
        case absent, present
        /// Removed, but files still open keep parts of it in use.
        case incompletelyRemoved
    }

    public enum Removal: Sendable, Equatable {
        case removed
        /// Open files keep the key partly in use: their holders must end, then remove again.
        case filesBusy
    }

    /// The key identifier of an encrypted directory, nil when it is not encrypted. Throws
    /// when the filesystem has no fscrypt at all (ENOTTY/EOPNOTSUPP).
    public static func policy(of fd: Int32, path: String) throws(FileSystemError) -> KeyIdentifier? {
        var id = [UInt8](repeating: 0, count: 16)
        let rc = lockwipe_fscrypt_get_policy(fd, &id)
        if rc == -ENODATA { return nil }
        guard rc == 0 else { throw FileSystemError("read the encryption policy of", path, code: -rc) }
        return KeyIdentifier(bytes: id)
    }

    /// Whether the filesystem of `fd` can hold encrypted directories.
    public static func isSupported(fd: Int32) -> Bool {
        var id = [UInt8](repeating: 0, count: 16)
        let rc = lockwipe_fscrypt_get_policy(fd, &id)
        return rc == 0 || rc == -ENODATA || rc == -EINVAL
    }

    /// Adds `key` to the kernel (for all users) on the filesystem of `fd`.
    public static func addKey(_ key: [UInt8], fd: Int32, path: String) throws(FileSystemError) -> KeyIdentifier {
        var id = [UInt8](repeating: 0, count: 16)
        let rc = key.withUnsafeBufferPointer { lockwipe_fscrypt_add_key(fd, $0.baseAddress, UInt32($0.count), &id) }
        guard rc == 0 else { throw FileSystemError("add the encryption key for", path, code: -rc) }
        return KeyIdentifier(bytes: id)
    }

    /// Makes the empty directory `fd` encrypted under `key` (which stays added).
    public static func encrypt(emptyDirectory fd: Int32, path: String, key: [UInt8]) throws(FileSystemError) -> KeyIdentifier {
        let id = try addKey(key, fd: fd, path: path)
        let rc = id.bytes.withUnsafeBufferPointer { lockwipe_fscrypt_set_policy(fd, $0.baseAddress) }
        guard rc == 0 else { throw FileSystemError("encrypt", path, code: -rc) }
        return id
    }

    /// Removes the key from the kernel for all users. `fd` must be outside the vault (its
    /// parent, or the filesystem's root): a descriptor open inside keeps the key in use.
    public static func removeKey(_ id: KeyIdentifier, fd: Int32, path: String) throws(FileSystemError) -> Removal {
        let rc = id.bytes.withUnsafeBufferPointer { lockwipe_fscrypt_remove_key(fd, $0.baseAddress) }
        guard rc >= 0 else { throw FileSystemError("remove the encryption key of", path, code: -rc) }
        return rc & lockwipe_fscrypt_removal_files_busy != 0 ? .filesBusy : .removed
    }

    public static func status(of id: KeyIdentifier, fd: Int32, path: String) throws(FileSystemError) -> KeyStatus {
        let rc = id.bytes.withUnsafeBufferPointer { lockwipe_fscrypt_key_status(fd, $0.baseAddress) }
        switch rc {
        case lockwipe_fscrypt_status_present: return .present
        case lockwipe_fscrypt_status_incompletely_removed: return .incompletelyRemoved
        case lockwipe_fscrypt_status_absent: return .absent
        default: throw FileSystemError("read the key status of", path, code: rc < 0 ? -rc : EINVAL)
        }
    }
}
