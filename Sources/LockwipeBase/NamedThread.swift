import Foundation

/// The daemon's own threads (the wake timer, vault calls, a wipe, its writers and batch
/// worker), each started with the name `top -H`, `ps -L` and `perf` show.
///
/// Foundation's `Thread.name` does not reliably reach the kernel on Linux: set before
/// `start()` it never does, and set from inside the thread only when the starting thread
/// has already recorded the new thread's handle. Otherwise the thread keeps the name of
/// the one that started it (the control socket's event loop, `NIO-SGLTN-1-#1`, for a lock
/// or a wipe). So the thread writes its own name where the kernel keeps it.
package enum NamedThread {
    /// `name`: 15 bytes at most, the kernel's limit. `stackSize` in bytes; nil for
    /// Foundation's default.
    package static func start(_ name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread {
            nameCurrentThread(name)
            body()
        }
        if let stackSize { thread.stackSize = stackSize }
        thread.start()
    }

    /// Writes the calling thread's name to `/proc/thread-self/comm`. A name is for people
    /// reading `top -H`: if it cannot be written, the thread keeps the one it inherited.
    static func nameCurrentThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
