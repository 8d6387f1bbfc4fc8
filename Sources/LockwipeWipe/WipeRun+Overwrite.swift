import CLockwipeFS
import Foundation

extension WipeRun {
    func overwrite(dirFd: Int32, name: [CChar], path: EntryPath, expected: stat) {
        let flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC
        var fd = openat(dirFd, name, flags)
        if fd < 0, errno == EPERM, clearEntryAttributes(dirFd: dirFd, name: name, path: path, st: expected) {
            fd = openat(dirFd, name, flags)
        }
        guard fd >= 0 else {
            let code = errno
            var now = stat()
            if code == ELOOP || code == ENXIO || code == EISDIR, fstatat(dirFd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 {
                // No longer a regular file (swapped since readdir): handle what is there now.
                if (now.st_mode & S_IFMT) == S_IFDIR { return skip(path, "changed into a directory during the wipe") }
                return unlink(dirFd: dirFd, name: name, path: path, st: now)
            }
            if code != ENOENT { skip(path, "cannot be opened to overwrite: \(Self.reason(code)); left in place") }
            return
        }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_dev == expected.st_dev else {
            close(fd)
            return skip(path, "changed during the wipe; left in place")
        }
        if st.st_nlink != 1 || st.st_size == 0 {
            // Linked elsewhere since readdir (its data belongs to that name too), or
            // nothing to overwrite.
            close(fd)
            return unlink(dirFd: dirFd, name: name, path: path, st: st)
        }
        // Written on a writer's thread (`OverwriteWriters`) while the walk goes on; the
        // batch thread waits for it before the batch is made durable, and reports a
        // failed write then.
        // The descriptor is kept for that (and for the truncation): the batch holds at
        // most `batchFileLimit`.
        let dup = batchDirectory(dirFd)
        let id = nextWriteID
        nextWriteID += 1
        writers.submit(.init(id: id, fd: fd, size: Int64(st.st_size), granule: Self.blockGranule(st)))
        batch.append(Pending(id: id, fd: fd, dirFd: dup, name: name, directory: path.directory, dev: UInt64(st.st_dev), ino: UInt64(st.st_ino), bytes: 0))
        batchBytes += Int64(st.st_size) * Int64(options.passes)
        if batch.count >= batchFileLimit || batchBytes >= engine.batchBytes { flush() }
    }

    /// The unit a partial write would make the kernel read first: the file system's block
    /// (`st_blksize`), at most a page (xfs may report a larger preferred I/O size, and
    /// writing on past the last block would allocate new ones), at least 512 bytes.
    static func blockGranule(_ st: stat, page: Int64 = Int64(sysconf(Int32(_SC_PAGESIZE)))) -> Int64 {
        max(512, min(Int64(st.st_blksize), page > 0 ? page : 4096))
    }
}
