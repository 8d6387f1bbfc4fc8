import CLockwipeFS
import Foundation

extension WipeRun {
    /// Clears immutable / append-only on an open file or directory, counting it; reports
    /// when the daemon may not (no CAP_LINUX_IMMUTABLE) or the filesystem has no flags.
    @discardableResult
    func clearAttributes(_ fd: Int32, _ path: @autoclosure () -> String) -> Bool {
        let result = lockwipe_clear_immutable(fd)
        if result > 0 {
            tally.attributesCleared += 1
            return true
        }
        if result == -EPERM || result == -EACCES {
            var flags: UInt32 = 0
            if lockwipe_get_inode_flags(fd, &flags) == 0, flags & (lockwipe_immutable_flag | lockwipe_append_flag) != 0 {
                skip(path(), "immutable or append-only, and the daemon may not clear it (needs CAP_LINUX_IMMUTABLE)")
            }
        }
        return false
    }

    /// Clears the attributes of an entry that refused to be unlinked or opened. Only
    /// regular files, directories and FIFOs are opened for that (read-only, non-blocking):
    /// opening a device node can have effects of its own.
    func clearEntryAttributes(dirFd: Int32, name: [CChar], path: EntryPath, st: stat) -> Bool {
        let kind = st.st_mode & S_IFMT
        guard kind == S_IFREG || kind == S_IFDIR || kind == S_IFIFO else { return false }
        let fd = openat(dirFd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var opened = stat()
        guard fstat(fd, &opened) == 0, opened.st_dev == st.st_dev, opened.st_ino == st.st_ino else { return false }
        return clearAttributes(fd, path.description)
    }
}
