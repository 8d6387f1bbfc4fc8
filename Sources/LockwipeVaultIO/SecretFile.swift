import Foundation
import LockwipeBase

/// A key file of lockwiped's own in its state directory (`machine.key`,
/// `offline-code.key`), read once through its descriptor: a regular file owned by
/// lockwiped's user, not readable or writable by anyone else, exactly `size` bytes.
package enum SecretFile {
    /// The file's `size` bytes, or nil when there is no file. The caller wipes them.
    package static func read(_ path: String, size: Int) throws -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw FileSystemError("open", path)
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileSystemError("stat", path) }
        guard st.st_mode & S_IFMT == S_IFREG, st.st_uid == geteuid(), st.st_mode & 0o077 == 0 else {
            throw FileSystemError("use", path + " (it must be a regular file owned by lockwiped's user, mode 0600)", code: EPERM)
        }
        var bytes = [UInt8](repeating: 0, count: size + 1)
        let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, size + 1) }
        guard n == size else {
            bytes.withUnsafeMutableBytes { zeroSecurely($0) }
            throw FileSystemError("read \(size) bytes from", path, code: EINVAL)
        }
        bytes.removeLast()
        return bytes
    }
}

extension SecretFile {
    /// Every byte of the file (at most `limit`), or nil when there is none; the same checks
    /// as `read(_:size:)`. For sealed credentials, whose size is not fixed.
    package static func readAll(_ path: String, limit: Int) throws -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw FileSystemError("open", path)
        }
        defer { close(fd) }
        try checkOwn(fd, path)
        var bytes = [UInt8](repeating: 0, count: limit + 1)
        var total = 0
        while total <= limit {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + total, limit + 1 - total) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FileSystemError("read", path)
            }
            if n == 0 { break }
            total += n
        }
        guard total <= limit else { throw FileSystemError("read", path + " (larger than \(limit) bytes)", code: EFBIG) }
        return Array(bytes[0..<total])
    }

    /// Creates `path` with `bytes` (0600) as `MachineKey` does: a temporary file made
    /// durable, then linked to its name, which fails when the name exists (EEXIST is
    /// thrown: nothing is replaced). The directory is made durable.
    package static func create(_ path: String, _ bytes: [UInt8]) throws {
        let temporary = path + ".new-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FileSystemError("create", temporary) }
        defer { unlink(temporary) }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, bytes.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == bytes.count, synced else { throw FileSystemError("write", temporary) }
        guard link(temporary, path) == 0 else { throw FileSystemError("create", path) }
        syncDirectory(of: path)
    }

    /// Overwrites the existing `path` in place with `bytes` (truncated to their size),
    /// never renaming over it: the old blocks are written over where the filesystem does
    /// so (docs/key-material.md).
    package static func overwrite(_ path: String, _ bytes: [UInt8]) throws {
        let fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw FileSystemError("open", path) }
        defer { close(fd) }
        try checkOwn(fd, path)
        let written = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, bytes.count, 0) }
        guard written == bytes.count, ftruncate(fd, off_t(bytes.count)) == 0, fsync(fd) == 0 else { throw FileSystemError("write", path) }
    }

    /// Destroys a secret file: overwritten in place with zeros over its whole size,
    /// `fsync`ed, unlinked, and the directory `fsync`ed. A file already gone is fine.
    package static func destroy(_ path: String) throws {
        let fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return }
            throw FileSystemError("open", path)
        }
        do {
            defer { close(fd) }
            try checkOwn(fd, path)
            var st = stat()
            guard fstat(fd, &st) == 0 else { throw FileSystemError("stat", path) }
            if st.st_size > 0 {
                let zeros = [UInt8](repeating: 0, count: Int(st.st_size))
                let written = zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress, zeros.count, 0) }
                guard written == zeros.count, fsync(fd) == 0 else { throw FileSystemError("overwrite", path) }
            }
        }
        guard unlink(path) == 0 || errno == ENOENT else { throw FileSystemError("unlink", path) }
        syncDirectory(of: path)
    }

    /// Moves `path` to `<path>.unopenable-<N>` beside it, the first N free, and returns the
    /// new path: a hard link, then the old name unlinked, then the directory made durable.
    /// Never replaces a file; the secret is kept, not destroyed.
    package static func setAside(_ path: String) throws -> String {
        for n in 1...1000 {
            let aside = path + ".unopenable-\(n)"
            if link(path, aside) != 0 {
                if errno == EEXIST { continue }
                throw FileSystemError("keep aside", path)
            }
            guard unlink(path) == 0 else { throw FileSystemError("unlink", path) }
            syncDirectory(of: path)
            return aside
        }
        throw FileSystemError("keep aside", path + " (1000 unopenable copies are there already)", code: EEXIST)
    }

    private static func checkOwn(_ fd: Int32, _ path: String) throws {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileSystemError("stat", path) }
        guard st.st_mode & S_IFMT == S_IFREG, st.st_uid == geteuid(), st.st_mode & 0o077 == 0, st.st_nlink == 1 else {
            throw FileSystemError("use", path + " (it must be a regular file owned by lockwiped's user, mode 0600)", code: EPERM)
        }
    }

    private static func syncDirectory(of path: String) {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let dir = open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
    }
}
