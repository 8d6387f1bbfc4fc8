/// Varlink's framing on a stream: every message ends with a NUL byte. Pure, so that the
/// daemon's decoder and the fuzz target (`Fuzz/`) run the same code.
public enum VarlinkFraming {
    public enum Next: Equatable, Sendable {
        /// A complete message: its bytes (without the NUL) occupy `range`; the NUL follows.
        case message(Range<Int>)
        /// No NUL yet and still within the limit: wait for more bytes.
        case needMore
        /// The message (complete or not) is larger than the limit: refuse the connection.
        case tooLarge
    }

    /// The first message in `bytes`, whose indices start at `bytes.startIndex`.
    public static func next<Bytes: Collection<UInt8>>(in bytes: Bytes, maxMessageBytes: Int) -> Next where Bytes.Index == Int {
        guard let end = bytes.firstIndex(of: 0) else {
            return bytes.count > maxMessageBytes ? .tooLarge : .needMore
        }
        return end - bytes.startIndex > maxMessageBytes ? .tooLarge : .message(bytes.startIndex..<end)
    }
}
