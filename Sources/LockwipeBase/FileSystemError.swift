import Foundation

/// A failed system call on a path, with the errno text: what an operator needs to act.
public struct FileSystemError: Error, Sendable, CustomStringConvertible {
    public var operation: String
    public var path: String
    public var code: Int32

    public init(_ operation: String, _ path: String, code: Int32 = errno) {
        self.operation = operation
        self.path = path
        self.code = code
    }

    public var description: String { "\(operation) \(path): \(String(cString: strerror(code)))" }
}

/// Opens `path` as a directory without following a symlink in its last component.
package func openDirectoryNoFollow(_ path: String) throws -> Int32 {
    let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    guard fd >= 0 else { throw FileSystemError("open", path) }
    return fd
}

/// Opens lockwiped's own directory `path` (created 0700 when `create` and missing),
/// refusing a symlink and a directory someone else owns or can enter: where its keys and
/// sealed outboxes are kept.
package func openPrivateDirectory(_ path: String, create: Bool) throws -> Int32 {
    if create, mkdir(path, 0o700) != 0, errno != EEXIST { throw FileSystemError("create", path) }
    let fd = try openDirectoryNoFollow(path)
    var st = stat()
    guard fstat(fd, &st) == 0 else {
        close(fd)
        throw FileSystemError("stat", path)
    }
    guard st.st_uid == geteuid(), st.st_mode & 0o077 == 0 else {
        close(fd)
        throw FileSystemError("use", path + " (it must be owned by lockwiped's user and mode 0700)", code: EPERM)
    }
    return fd
}
