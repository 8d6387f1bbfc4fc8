import CLockwipeFS
import Foundation
import LockwipeBase
import LockwipeCore

/// A vault directory as registered: its path and the inode it was at registration.
///
/// A vault is an inode, not a path. Every action reaches it with `VaultPath.open`, which
/// walks from `/` without following any symlink and refuses any directory that is not the
/// recorded device and inode; the action then works on that descriptor only. A path whose
/// identity was never recorded (a registration made before `v5-vault-identity` whose path
/// did not pass the ancestor rule at start-up) is never acted on.
public struct VaultDirectory: Sendable, Hashable, CustomStringConvertible {
    public struct Identity: Sendable, Hashable, CustomStringConvertible {
        public var device: UInt64
        public var inode: UInt64
        public init(device: UInt64, inode: UInt64) {
            self.device = device
            self.inode = inode
        }
        init(_ st: stat) { self.init(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)) }
        public var description: String { "device \(device), inode \(inode)" }
    }

    public var path: String
    public var identity: Identity?

    public init(path: String, identity: Identity?) {
        self.path = path
        self.identity = identity
    }

    public var description: String { path }

    /// The directory at `path` now, identified by the safe walk (tests and the recording
    /// of registrations made before identities were kept).
    public static func current(_ path: String) throws(VaultOpenError) -> VaultDirectory {
        let opened = try VaultPath.walk(path)
        defer { opened.close() }
        return VaultDirectory(path: path, identity: opened.identity)
    }
}

/// Why a recorded vault could not be opened. Nothing was touched.
public enum VaultOpenError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The path (or one of its components) does not exist: the vault was removed or renamed.
    case missing(path: String, component: String)
    /// A component is a symlink or not a directory: the walk never follows one.
    case notADirectory(path: String, component: String)
    /// The path leads to a directory that is not the recorded inode (renamed, replaced).
    case replaced(path: String, expected: VaultDirectory.Identity, found: VaultDirectory.Identity)
    /// No identity was recorded for this path (see `VaultDirectory`).
    case unrecorded(path: String)
    /// Something is mounted on the vault's path that is not the vault's own filesystem
    /// (a user's FUSE filesystem, say): the walk does not cross into it.
    case mountedOver(path: String, mount: String)
    case failed(path: String, component: String, code: Int32)

    public var path: String {
        switch self {
        case .missing(let p, _), .notADirectory(let p, _), .replaced(let p, _, _), .unrecorded(let p), .mountedOver(let p, _), .failed(let p, _, _): return p
        }
    }

    public var description: String {
        switch self {
        case .missing(let path, let component):
            return component == path
                ? "\(path): the vault directory is missing (removed or renamed)"
                : "\(path): the vault directory is missing (\(component) does not exist)"
        case .notADirectory(let path, let component):
            return "\(path): \(component) is a symlink or not a directory; the vault is never reached through a symlink"
        case .replaced(let path, let expected, let found):
            return "\(path): is not the registered vault directory (registered: \(expected); found: \(found)); it was renamed or replaced"
        case .unrecorded(let path):
            return "\(path): no device and inode were recorded for this vault (registered before lockwipe recorded them, "
                + "and its path does not pass the ancestor rule); unregister and register it again"
        case .mountedOver(let path, let mount):
            return "\(path): another filesystem is mounted over the vault directory (\(mount)); it is not entered"
        case .failed(let path, let component, let code):
            return "\(path): cannot open \(component): \(String(cString: strerror(code)))"
        }
    }
}

/// A vault directory opened by `VaultPath`: a descriptor on it and on its parent (both
/// `O_CLOEXEC`), the name in the parent, and what `fstat` said. The caller closes it.
package struct OpenedVault {
    package var fd: Int32
    package var parent: Int32
    package var name: String
    var stat: stat
    var identity: VaultDirectory.Identity { .init(stat) }

    package func close() {
        Glibc.close(fd)
        Glibc.close(parent)
    }
}
