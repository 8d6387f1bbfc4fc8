import CLockwipeFS
import Foundation
import LockwipeCore
import LockwipeVaultIO

/// What a wipe of one vault will meet, read without changing anything: the census (what
/// the overwrite writes, what is unlinked, the mount points it will not enter), the media
/// and the caveats. The wipe takes it before erasing (progress totals, the report's
/// media and caveats); `lockwipectl wipe --dry-run` shows it.
package struct VaultSurvey: Sendable, Equatable {
    package struct Census: Sendable, Equatable {
        /// Regular files with one link: what an overwrite writes over.
        package var files = 0
        /// Their data (allocated bytes, so a sparse file counts what it holds).
        package var bytes: Int64 = 0
        package var directories = 0
        /// Symlinks, hard-linked files, FIFOs, sockets, devices: only unlinked.
        package var otherEntries = 0
        /// Files whose extents are shared with other files or snapshots.
        package var sharedFiles = 0
        package var sharedBytes: Int64 = 0
        /// Mount points inside the vault: never entered, so the wipe would be incomplete.
        package var mountPoints: [String] = []
        /// The walk stopped going deeper at the descriptor budget: counts are a floor.
        package var truncated = false
    }

    package var path: String
    package var census = Census()
    package var media: MediaFacts?
    package var caveats: [WipeCaveat] = []
    /// Why the vault could not be opened as registered (a wipe would leave it untouched).
    package var problem: String?

    /// Surveys `vault`: opened as the wipe opens it (`VaultPath.open`), then walked
    /// read-only relative to descriptors, never following a symlink or leaving the file
    /// system. With `count` false only the media are read (a crypto-erase needs no
    /// census). `overwrite`: whether the wipe overwrites (the caveats apply only then).
    package static func take(_ vault: VaultDirectory, count: Bool, overwrite: Bool, maxOpenDirectories: Int) -> VaultSurvey {
        var survey = VaultSurvey(path: vault.path)
        let opened: OpenedVault
        do {
            opened = try VaultPath.open(vault)
        } catch {
            survey.problem = "\(error)"
            return survey
        }
        close(opened.parent)
        let probe = MediaProbe.probe(fd: opened.fd, path: vault.path)
        survey.media = probe.facts
        let shareable = ["btrfs", "xfs", "bcachefs", "zfs", "ocfs2"].contains(probe.facts.filesystem)
        if count {
            survey.census = walk(opened.fd, root: vault.path, sharing: overwrite && shareable, maxOpen: maxOpenDirectories)
        } else {
            close(opened.fd)
        }
        let findings = WipeCaveats.Findings(
            media: probe.facts, snapshots: probe.snapshots, isSnapshot: probe.isSnapshot, sharedFiles: survey.census.sharedFiles,
            sharedBytes: survey.census.sharedBytes)
        survey.caveats = WipeCaveats.detect(findings, overwrite: overwrite)
        return survey
    }

    /// The census walk (it closes `rootFd`).
    private static func walk(_ rootFd: Int32, root: String, sharing: Bool, maxOpen: Int) -> Census {
        var census = Census()
        var rootStat = stat()
        guard fstat(rootFd, &rootStat) == 0, let rootDir = fdopendir(rootFd) else {
            close(rootFd)
            return census
        }
        var rootMount: UInt64 = 0
        let haveMountIDs = lockwipe_mount_id(rootFd, "", &rootMount) == 0
        // One name per level (`WalkPath`); a path is spelled out only for a mount point.
        var stack: [(dir: OpaquePointer, path: WalkPath)] = [(rootDir, WalkPath(root: root))]
        defer { for frame in stack { closedir(frame.dir) } }
        while let (dir, path) = stack.last {
            guard let entry = readdir(dir) else {
                closedir(stack.removeLast().dir)
                continue
            }
            let name = WipeRun.name(of: entry)
            if name == [46, 0] || name == [46, 46, 0] { continue }
            var st = stat()
            guard fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                var mount: UInt64 = 0
                if st.st_dev != rootStat.st_dev || (haveMountIDs && lockwipe_mount_id(dirfd(dir), name, &mount) == 0 && mount != rootMount) {
                    census.mountPoints.append(path.text(name))
                    continue
                }
                census.directories += 1
                guard stack.count < maxOpen else {
                    census.truncated = true
                    continue
                }
                let fd = openat(dirfd(dir), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                var opened = stat()
                if fd >= 0, fstat(fd, &opened) == 0, opened.st_dev == st.st_dev, opened.st_ino == st.st_ino, let d = fdopendir(fd) {
                    stack.append((d, WalkPath(name, in: path)))
                } else if fd >= 0 {
                    close(fd)
                }
            case S_IFREG where st.st_nlink == 1:
                census.files += 1
                let bytes = min(Int64(st.st_size), Int64(st.st_blocks) * 512)
                census.bytes += bytes
                if sharing, isShared(dirfd(dir), name, st) {
                    census.sharedFiles += 1
                    census.sharedBytes += bytes
                }
            default:
                census.otherEntries += 1
            }
        }
        return census
    }

    /// Whether the file's extents are shared (FIEMAP), checked on a descriptor that is the
    /// file the walk saw (device and inode); opening it changes nothing (no read, O_NOATIME).
    private static func isShared(_ dirFd: Int32, _ name: [CChar], _ seen: stat) -> Bool {
        let fd = openat(dirFd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC | O_NOATIME)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_dev == seen.st_dev, st.st_ino == seen.st_ino, (st.st_mode & S_IFMT) == S_IFREG else { return false }
        return lockwipe_has_shared_extents(fd) == 1
    }
}
