import Dispatch
import Foundation
import Synchronization

/// The last reply encoded for one method, reused while the value it encodes is unchanged.
///
/// A status report is the same from one request to the next until a registration changes
/// or a second passes (its times are whole seconds), and encoding it (Foundation's
/// `JSONEncoder`, snake-case keys, sorted) is most of what a `GetStatus` costs. Comparing
/// the new report with the last one is far cheaper than encoding it again, and the bytes
/// are then exactly those the encoder would produce. One entry: callers that see different
/// reports (an administrator, a user) simply encode as before.
final class ReplyMemo<Value: Equatable & Sendable>: Sendable {
    private let encode: @Sendable (Value) throws -> Data
    private let keep: Duration?
    private let dropped: @Sendable () -> Void
    private let last = Mutex<(value: Value, data: Data, stamp: UInt64)?>(nil)
    private let stamps = Atomic<UInt64>(0)

    /// `keep`: how long an entry is kept after it was encoded (nil: until the next one);
    /// `dropped` is called when one is let go that way, on a global dispatch queue.
    init(keep: Duration? = nil, dropped: @escaping @Sendable () -> Void = {}, encode: @escaping @Sendable (Value) throws -> Data) {
        self.encode = encode
        self.keep = keep
        self.dropped = dropped
    }

    func reply(_ value: Value) throws -> Data {
        if let hit = last.withLock({ last in last.flatMap { $0.value == value ? $0.data : nil } }) { return hit }
        let data = try encode(value)
        let stamp = stamps.add(1, ordering: .relaxed).newValue
        last.withLock { $0 = (value, data, stamp) }
        if let keep {
            let (seconds, attoseconds) = keep.components
            let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in self?.drop(stamp) }
        }
        return data
    }

    /// Lets the entry `stamp` go, unless a newer one replaced it meanwhile.
    private func drop(_ stamp: UInt64) {
        let dropped = last.withLock { last -> Bool in
            guard last?.stamp == stamp else { return false }
            last = nil
            return true
        }
        if dropped { self.dropped() }
    }
}
