import Foundation

/// Runs a wipe on a thread of its own: a wipe may walk and overwrite for hours, and would
/// hold a thread of the shared pool (`BlockingPool`) all that time.
func runOnWipeThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.stackSize = 8 << 20
        thread.name = "lockwiped-wipe"
        thread.start()
    }
}
