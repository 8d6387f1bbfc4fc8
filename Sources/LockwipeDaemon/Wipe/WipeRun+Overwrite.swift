import CLockwipeFS
import Foundation

extension WipeRun {
    func overwrite(dirFd: Int32, name: [CChar], path: String, expected: stat) {
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
        var written: Int64 = 0
        for pass in 0..<options.passes {
            switch writeData(fd, size: Int64(st.st_size), granule: Self.blockGranule(st)) {
            case .success(let bytes): written += bytes
            case .failure(let error):
                close(fd)
                return skip(path, error.code == ECANCELED ? Self.cancelledReason : "could not be overwritten (\(Self.reason(error.code))); left in place")
            }
            // Every pass but the last must reach the disk, or the page cache simply keeps
            // the last one; the last is made durable with its batch.
            if pass < options.passes - 1, fdatasync(fd) != 0 {
                let code = errno
                close(fd)
                return skip(path, "overwrite pass could not be made durable (\(Self.reason(code))); left in place")
            }
        }
        // The disk starts on this file now, while the next one is generated; the batch's
        // flush waits for it and is what makes the pass durable. The descriptor is kept
        // for that (and for the truncation): the batch holds at most `batchFileLimit`.
        _ = lockwipe_start_writeback(fd)
        let dup = batchDirectory(dirFd)
        batch.append(Pending(fd: fd, dirFd: dup, name: name, path: path, dev: UInt64(st.st_dev), ino: UInt64(st.st_ino), bytes: written))
        batchBytes += written
        if batch.count >= batchFileLimit || batchBytes >= engine.batchBytes { flush() }
    }

    struct WriteError: Error { var code: Int32 }

    /// The unit a partial write would make the kernel read first: the file system's block
    /// (`st_blksize`), at most a page (xfs may report a larger preferred I/O size, and
    /// writing on past the last block would allocate new ones), at least 512 bytes.
    static func blockGranule(_ st: stat, page: Int64 = Int64(sysconf(Int32(_SC_PAGESIZE)))) -> Int64 {
        max(512, min(Int64(st.st_blksize), page > 0 ? page : 4096))
    }

    /// Writes the pattern over every data range of the file (`SEEK_DATA`/`SEEK_HOLE`), so a
    /// sparse file is not inflated. Large chunks, positioned writes: no per-block calls.
    ///
    /// The range that ends at the end of the file is written on to the end of its last
    /// block (`granule`): a write that covers only part of a block not in the page cache
    /// makes the kernel read that block from the disk first, one synchronous read per file
    /// (with 10,000 files of 100 KiB, more than half of the overwrite's time). The block is
    /// the file's already, so nothing is allocated; only the size grows, by less than a
    /// block, and the file is truncated and unlinked once the batch is durable. Returns
    /// the file's own bytes overwritten, not the slack past its end.
    func writeData(_ fd: Int32, size: Int64, granule: Int64) -> Result<Int64, WriteError> {
        var offset: Int64 = 0
        var written: Int64 = 0
        while offset < size {
            var data = lseek(fd, off_t(offset), SEEK_DATA)
            var hole: off_t
            if data < 0 {
                if errno == ENXIO { break }  // only a hole is left
                data = off_t(offset)
                hole = off_t(size)
            } else {
                hole = lseek(fd, data, SEEK_HOLE)
                if hole < 0 { hole = off_t(size) }
            }
            let to = min(Int64(hole), size)
            let end = to == size ? (size + granule - 1) / granule * granule : to
            var position = Int64(data)
            while position < end {
                if progress.isCancelled { return .failure(WriteError(code: ECANCELED)) }
                let length = Int(min(Int64(source.chunkSize), end - position))
                let n = source.withNext(length) { chunk in pwrite(fd, chunk.baseAddress, chunk.count, off_t(position)) }
                if n < 0 {
                    if errno == EINTR { continue }
                    return .failure(WriteError(code: errno))
                }
                let own = max(0, min(position + Int64(n), size) - position)
                position += Int64(n)
                written += own
                progress.update { $0.bytesWritten += own }
            }
            offset = max(Int64(hole), offset + 1)
        }
        return .success(written)
    }
}
