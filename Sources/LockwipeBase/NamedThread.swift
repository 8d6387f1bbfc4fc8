import Foundation

/// The daemon's own threads (the wake timer, vault calls, a wipe, its writers and batch
/// worker), each started with the name `top -H`, `ps -L` and `perf` show.
///
/// Foundation's `Thread.name` set before `start()` never reaches the kernel on Linux: the
/// thread keeps the name of the one that started it (the control socket's event loop,
/// `NIO-SGLTN-1-#1`, for a lock or a wipe). Set from inside the thread, it does.
package enum NamedThread {
    /// `name`: 15 bytes at most, the kernel's limit. `stackSize` in bytes; nil for
    /// Foundation's default.
    package static func start(_ name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread {
            Thread.current.name = name
            body()
        }
        if let stackSize { thread.stackSize = stackSize }
        thread.start()
    }
}
