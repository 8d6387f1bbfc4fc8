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
