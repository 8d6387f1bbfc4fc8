import CLockwipeFS
import Foundation
import LockwipeBase
import LockwipeCore

/// Takes back a vault from what its user mounted on or inside it, before a lock or wipe
/// (`MountTakeback.plan` decides what; docs/security.md says why).
///
/// A mount is acted on through a descriptor, never by path: the mount point is opened
/// with `O_PATH` (no call reaches the mounted filesystem, so a FUSE server that never
/// answers cannot stall it) from a directory reached without symlinks, the descriptor's
/// mount id (`/proc/self/fdinfo`) must be the planned mount's, then its FUSE connection
/// is aborted where `/sys/fs/fuse/connections` is writable, and it is detached through
/// `/proc/self/fd/N` (`umount2(MNT_DETACH)`). Detaching acts in the daemon's mount
/// namespace: the installed unit's is a slave of the host's, so the user's own view keeps
/// the mount until her FUSE server ends (which ending her processes does) or the aborted
/// connection makes it useless.
package enum VaultMountTakeback {
    package struct Detached: Sendable {
        package var mount: MountEntry
        /// Whether its FUSE connection was aborted (every namespace loses it at once).
        package var aborted: Bool
    }

    package struct Report: Sendable {
        package var detached: [Detached] = []
        /// Mounts left in place, and why (root's, or the vault's own filesystem).
        package var left: [(mount: MountEntry, reason: String)] = []
        /// Mounts that should have been detached and were not, and why.
        package var failed: [(mount: MountEntry, reason: String)] = []
    }

    /// Detaches, per the plan, what is mounted on or inside `vault`.
    package static func takeBack(_ vault: VaultDirectory) -> Report {
        var report = Report()
        let steps = MountTakeback.plan(mounts: MountTable.parse(VaultPath.mountInfo()), vault: vault.path, vaultDevice: vault.identity?.device)
        for step in steps {
            switch step.action {
            case .leave(let reason):
                report.left.append((step.mount, reason))
            case .detach:
                switch detach(step.mount, in: vault) {
                case .success(let aborted): report.detached.append(Detached(mount: step.mount, aborted: aborted))
                case .failure(let error): report.failed.append((step.mount, error.reason))
                }
            }
        }
        return report
    }

    struct Failure: Error {
        var reason: String
    }

    private static func detach(_ mount: MountEntry, in vault: VaultDirectory) -> Result<Bool, Failure> {
        let fd: Int32
        switch openMountPoint(mount.mountPoint, in: vault) {
        case .success(let opened): fd = opened
        case .failure(let error): return .failure(error)
        }
        defer { close(fd) }
        guard let id = mountID(of: fd), id == mount.id else {
            return .failure(Failure(reason: "it moved while it was being detached (the path no longer leads to it)"))
        }
        let aborted = mount.isFUSE && abortFUSEConnection(minor: mount.minor)
        let detached = lockwipe_detach_mount("/proc/self/fd/\(fd)")
        guard detached == 0 else {
            return .failure(Failure(reason: "cannot detach it: \(String(cString: strerror(-detached)))"))
        }
        return .success(aborted)
    }

    /// An `O_PATH` descriptor on the root of what is mounted at `mountPoint`, reached
    /// without following any symlink: from the vault's parent (only root can change the
    /// vault's ancestors) when it is mounted on the vault itself, else from the vault,
    /// staying beneath it and on its filesystem up to the last component.
    private static func openMountPoint(_ mountPoint: String, in vault: VaultDirectory) -> Result<Int32, Failure> {
        let noLinks = lockwipe_resolve_no_symlinks | lockwipe_resolve_no_magiclinks
        let pathFlags = lockwipe_o_path | UInt64(O_NOFOLLOW)
        if mountPoint == vault.path {
            let parentPath = (vault.path as NSString).deletingLastPathComponent
            let name = (vault.path as NSString).lastPathComponent
            let parent: OpenedVault
            do {
                parent = try VaultPath.walk(parentPath)
            } catch {
                return .failure(Failure(reason: "cannot open the vault's parent: \(error)"))
            }
            defer { parent.close() }
            let fd = lockwipe_openat2(parent.fd, name, pathFlags, noLinks)
            return fd >= 0 ? .success(fd) : .failure(Failure(reason: "cannot open it: \(String(cString: strerror(-fd)))"))
        }
        let opened: OpenedVault
        do {
            opened = try VaultPath.open(vault)
        } catch {
            return .failure(Failure(reason: "\(error)"))
        }
        defer { opened.close() }
        let relative = String(mountPoint.dropFirst(vault.path.count + 1))
        let parentRelative = (relative as NSString).deletingLastPathComponent
        let name = (relative as NSString).lastPathComponent
        var parent = opened.fd
        if !parentRelative.isEmpty {
            parent = lockwipe_openat2(
                opened.fd, parentRelative, lockwipe_o_path | UInt64(O_DIRECTORY), noLinks | lockwipe_resolve_beneath | lockwipe_resolve_no_xdev)
            guard parent >= 0 else { return .failure(Failure(reason: "cannot reach it inside the vault: \(String(cString: strerror(-parent)))")) }
        }
        defer { if parent != opened.fd { close(parent) } }
        let fd = lockwipe_openat2(parent, name, pathFlags, noLinks | lockwipe_resolve_beneath)
        return fd >= 0 ? .success(fd) : .failure(Failure(reason: "cannot open it: \(String(cString: strerror(-fd)))"))
    }

    /// The mount id of an open descriptor, from `/proc/self/fdinfo` (no filesystem call).
    static func mountID(of fd: Int32) -> UInt64? {
        guard let text = ProcFile.read("/proc/self/fdinfo/\(fd)") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("mnt_id:") {
            return UInt64(line.dropFirst("mnt_id:".count).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// Aborts the FUSE connection `minor` (its directory in fusectl is the mount's minor
    /// device number): every request waiting on its server fails at once, in every mount
    /// namespace. False when fusectl is not mounted or not writable here (the unit's
    /// `ReadWritePaths=-/sys/fs/fuse/connections` makes it so where it is mounted).
    package static func abortFUSEConnection(minor: UInt32) -> Bool {
        let fd = open("/sys/fs/fuse/connections/\(minor)/abort", O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return write(fd, "1", 1) == 1
    }
}
