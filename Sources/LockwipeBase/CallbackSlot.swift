import Synchronization

/// One callback, set once (or again) and called from any thread.
///
/// The closure is kept in a class box and the box is what the lock hands out. A closure kept
/// in a `Mutex` directly and read with `withLock { $0 }` passes through the `inout`
/// parameter at the generic abstraction and is written back wrapped in reabstraction
/// thunks: every call made the next one two frames deeper, so each state write grew slower
/// and the store's thread overflowed its stack after about 124,000 writes (issue 40,
/// finding 6). The box's reference is copied instead; the closure is never rewritten.
public final class CallbackSlot<Argument>: Sendable {
    private final class Box: Sendable {
        let call: @Sendable (Argument) -> Void
        init(_ call: @escaping @Sendable (Argument) -> Void) { self.call = call }
    }
    private let box = Mutex<Box?>(nil)

    public init() {}

    public func set(_ call: @escaping @Sendable (Argument) -> Void) {
        let new = Box(call)
        box.withLock { $0 = new }
    }

    /// Calls the closure set, if any (outside the lock).
    public func call(_ argument: Argument) {
        let current = box.withLock { $0 }
        current?.call(argument)
    }
}
