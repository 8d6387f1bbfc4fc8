import Foundation
import LockwipeBase

/// Runs a wipe on a thread of its own: a wipe may walk and overwrite for hours, and would
/// hold a thread of the shared pool (`BlockingPool`) all that time.
func runOnWipeThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        NamedThread.start("lockwiped-wipe", stackSize: 8 << 20) {
            continuation.resume(with: Result { try body() })
        }
    }
}
