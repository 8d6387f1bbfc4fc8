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
    private let last = Mutex<(value: Value, data: Data)?>(nil)

    init(encode: @escaping @Sendable (Value) throws -> Data) {
        self.encode = encode
    }

    func reply(_ value: Value) throws -> Data {
        if let hit = last.withLock({ last in last.flatMap { $0.value == value ? $0.data : nil } }) { return hit }
        let data = try encode(value)
        last.withLock { $0 = (value, data) }
        return data
    }
}
