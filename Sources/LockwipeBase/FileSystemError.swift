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
