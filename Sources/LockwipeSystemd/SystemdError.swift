#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A failed system call, naming the call and the errno it returned.
public struct SystemdError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was attempted, e.g. "getsockopt(SO_PEERCRED) on fd 7".
    public var operation: String
    /// The positive errno value.
    public var errno: Int32

    public init(operation: String, errno: Int32) {
        self.operation = operation
        self.errno = errno
    }

    public var description: String {
        "\(operation) failed: \(String(cString: strerror(errno))) (errno \(errno))"
    }
}
