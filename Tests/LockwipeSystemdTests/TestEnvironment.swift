import Synchronization

/// Serializes every test that changes or reads the process environment (setenv may move
/// `environ` under a concurrent getenv). `.serialized` alone only orders tests within one suite.
enum TestEnvironment {
    private static let lock = Mutex(())

    static func exclusive<R>(_ body: () throws -> R) rethrows -> R {
        try lock.withLock { _ in try body() }
    }
}
