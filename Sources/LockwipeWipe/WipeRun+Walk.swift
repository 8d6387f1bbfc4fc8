import CLockwipeFS
import Foundation
import LockwipeCore
import LockwipeVaultIO

/// Emptying one vault: the walks (at most 3) over its tree, depth first through
/// descriptors, and the removal of its root when `remove_root` asks for it.
extension WipeRun {
    private struct Frame {
        var dir: OpaquePointer?
        var fd: Int32
        var dev: UInt64
        var ino: UInt64
        /// Its name and, shared, its parent's: a frame holds one name, never a path
        /// (`WalkPath`); its `name` is the one to remove it by from its parent.
        var path: WalkPath
        /// Subdirectories already walked that were not removed at once (something inside
        /// was skipped, or their removal waits for the batch): not entered again when this
        /// directory is re-opened through `..` and read from its start. Without it, every
        /// level of a deep chain re-opened on the way up walked the whole chain below it
        /// again, when anything at the bottom stayed.
        var walked: Set<DirectoryID> = []
    }

    private enum WalkEnd { case finished, lostWay, cancelled }

    /// Empties (or removes, per `remove_root`) one vault. Entries that appear while the
    /// walk runs, or a walk that lost its way back up, lead to another walk (at most 3).
    func erase(root vault: VaultDirectory) {
        let root = vault.path
        startClearingNames(vault)
        for attempt in 1...3 {
            let skippedBefore = tally.skipped.count
            let end = progress.isCancelled ? .cancelled : walk(vault)
            if end == .cancelled {
                discardBatch()  // not durable yet: those files stay, and are overwritten again on resume
                return skip(root, Self.cancelledReason)
            }
            settle()
            guard let left = remainingEntries(vault) else { return }  // could not be opened: reported
            if left == 0 {
                if options.removeRoot {
                    writeOutDirectories()  // its blocks, names wiped, reach the disk before rmdir frees them
                    removeRoot(vault)
                }
                return
            }
            // Entries left because they were skipped are already reported.
            if end == .finished && tally.skipped.count > skippedBefore { return }
            if attempt == 3 {
                skip(root, "still holds \(left) entries after 3 walks (something keeps writing into it)")
            }
        }
    }

    /// Entries left in the root, or nil when the recorded root cannot be opened (reported).
    private func remainingEntries(_ vault: VaultDirectory) -> Int? {
        let opened: OpenedVault
        do {
            opened = try VaultPath.open(vault)
        } catch {
            skip(vault.path, "\(error)")
            return nil
        }
        close(opened.parent)
        let fd = opened.fd
        guard let dir = fdopendir(fd) else {
            close(fd)
            return 0
        }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            let first = entry.pointee.d_name.0, second = entry.pointee.d_name.1, third = entry.pointee.d_name.2
            if first == 46 && (second == 0 || (second == 46 && third == 0)) { continue }
            count += 1
        }
        return count
    }

    private func removeRoot(_ vault: VaultDirectory) {
        let root = vault.path
        let opened: OpenedVault
        do {
            opened = try VaultPath.open(vault)
        } catch {
            return skip(root, "cannot be opened to remove it: \(error)")
        }
        close(opened.fd)
        let parentFd = opened.parent
        let name = Array(opened.name.utf8CString)
        defer { close(parentFd) }
        var st = stat()
        guard let identity = rootIdentity, fstatat(parentFd, name, &st, AT_SYMLINK_NOFOLLOW) == 0,
            UInt64(st.st_dev) == identity.dev, UInt64(st.st_ino) == identity.ino
        else { return skip(root, "was replaced during the wipe; not removed") }
        if unlinkat(parentFd, name, AT_REMOVEDIR) == 0 {
            removed()
        } else if errno != ENOENT {
            skip(root, "the emptied vault directory cannot be removed: \(Self.reason(errno))")
        }
    }

    // MARK: The walk

    private func walk(_ vault: VaultDirectory) -> WalkEnd {
        let root = vault.path
        let rootFd: Int32
        do {
            let opened = try VaultPath.open(vault)
            close(opened.parent)
            rootFd = opened.fd
        } catch {
            // Missing or replaced: nothing is touched, and the wipe is not complete.
            skip(root, "\(error)")
            return .finished
        }
        var rootStat = stat()
        guard fstat(rootFd, &rootStat) == 0, let rootDir = fdopendir(rootFd) else {
            skip(root, Self.reason(errno))
            close(rootFd)
            return .finished
        }
        rootIdentity = (UInt64(rootStat.st_dev), UInt64(rootStat.st_ino))
        var rootMount: UInt64 = 0
        let haveMountIDs = lockwipe_mount_id(rootFd, "", &rootMount) == 0
        clearAttributes(rootFd, root)

        var stack = [Frame(dir: rootDir, fd: rootFd, dev: UInt64(rootStat.st_dev), ino: UInt64(rootStat.st_ino), path: WalkPath(root: root))]
        var openCount = 1
        defer {
            for frame in stack { if let dir = frame.dir { closedir(dir) } }
        }

        while let top = stack.indices.last {
            if progress.isCancelled { return .cancelled }
            errno = 0
            guard let entry = readdir(stack[top].dir!) else {
                if errno != 0 { skip(stack[top].path.text(), "cannot be read: \(Self.reason(errno))") }
                let child = stack.removeLast()
                guard let parent = stack.indices.last else {
                    closedir(child.dir!)
                    break
                }
                if stack[parent].fd < 0 {
                    // Its descriptor was closed to bound descriptors: go back up through
                    // `..` of the child and make sure it is the directory we came from.
                    let fd = openat(child.fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                    var st = stat()
                    guard fd >= 0, fstat(fd, &st) == 0, UInt64(st.st_dev) == stack[parent].dev,
                        UInt64(st.st_ino) == stack[parent].ino, let dir = fdopendir(fd)
                    else {
                        if fd >= 0 { close(fd) }
                        closedir(child.dir!)
                        return .lostWay
                    }
                    stack[parent].fd = fd
                    stack[parent].dir = dir
                    openCount += 1
                }
                closedir(child.dir!)
                openCount -= 1
                // After its files in the batch, if any; ENOTEMPTY: something inside was
                // skipped, and that entry says why.
                let removedBefore = tally.removed
                removeDirectory(parentFd: stack[parent].fd, name: child.path.name, path: EntryPath(directory: child.path))
                if tally.removed == removedBefore { stack[parent].walked.insert(DirectoryID(dev: child.dev, ino: child.ino)) }
                continue
            }
            let name = Self.name(of: entry)
            if name == [46, 0] || name == [46, 46, 0] { continue }  // "." and ".."
            let type = entry.pointee.d_type
            let dirFd = stack[top].fd
            let path = EntryPath(directory: stack[top].path, name: name)

            if type != DirectoryType.directory && type != DirectoryType.unknown
                && !(type == DirectoryType.regular && options.passes > 0)
            {
                // Not a directory and nothing to overwrite: unlink by name, as `rm` does,
                // without a stat. unlinkat(…, 0) never removes a directory (EISDIR), so a
                // stale type only sends the entry to the careful path below.
                if unlinkat(dirFd, name, 0) == 0 {
                    removed()
                    continue
                }
                if errno == ENOENT { continue }
            }

            var st = stat()
            if fstatat(dirFd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 {
                if errno != ENOENT { skip(path, Self.reason(errno)) }
                continue
            }
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                removeEntry(dirFd: dirFd, name: name, path: path, st: st)
                continue
            }
            if !stack[top].walked.isEmpty, stack[top].walked.contains(DirectoryID(dev: UInt64(st.st_dev), ino: UInt64(st.st_ino))) {
                continue
            }
            var mount: UInt64 = 0
            let otherMount = haveMountIDs && lockwipe_mount_id(dirFd, name, &mount) == 0 && mount != rootMount
            if st.st_dev != rootStat.st_dev || otherMount {
                skip(path, "a mount point of another file system; not entered")
                continue
            }
            let childFd = openat(dirFd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if childFd < 0 {
                let code = errno
                if code == ELOOP || code == ENOTDIR, fstatat(dirFd, name, &st, AT_SYMLINK_NOFOLLOW) == 0,
                    (st.st_mode & S_IFMT) != S_IFDIR
                {
                    // Swapped for a symlink or a file since readdir: remove that instead.
                    removeEntry(dirFd: dirFd, name: name, path: path, st: st)
                } else if code != ENOENT {
                    skip(path, Self.reason(code))
                }
                continue
            }
            var opened = stat()
            guard fstat(childFd, &opened) == 0, opened.st_dev == st.st_dev, opened.st_ino == st.st_ino,
                let childDir = fdopendir(childFd)
            else {
                skip(path, "changed during the wipe; not entered")
                close(childFd)
                continue
            }
            let childPath = WalkPath(name, in: stack[top].path)
            clearAttributes(childFd, childPath.text())
            stack.append(Frame(dir: childDir, fd: childFd, dev: UInt64(opened.st_dev), ino: UInt64(opened.st_ino), path: childPath))
            openCount += 1
            if openCount > engine.maxOpenDirectories {
                // Open frames are always the deepest ones: close the shallowest of them.
                let lowest = stack.count - openCount
                closedir(stack[lowest].dir!)
                stack[lowest].dir = nil
                stack[lowest].fd = -1
                openCount -= 1
            }
        }
        return .finished
    }

    /// Removes a non-directory: regular files with one link are overwritten first (and
    /// unlinked after the batch is durable); everything else is only unlinked.
    private func removeEntry(dirFd: Int32, name: [CChar], path: EntryPath, st: stat) {
        if (st.st_mode & S_IFMT) == S_IFREG && st.st_nlink == 1 && options.passes > 0 {
            overwrite(dirFd: dirFd, name: name, path: path, expected: st)
            return
        }
        unlink(dirFd: dirFd, name: name, path: path, st: st)
    }

    func unlink(dirFd: Int32, name: [CChar], path: EntryPath, st: stat) {
        if unlinkat(dirFd, name, 0) == 0 { return removed() }
        var code = errno
        if code == EPERM, clearEntryAttributes(dirFd: dirFd, name: name, path: path, st: st) {
            if unlinkat(dirFd, name, 0) == 0 { return removed() }
            code = errno
        }
        if code != ENOENT { skip(path, Self.reason(code)) }
    }
}
