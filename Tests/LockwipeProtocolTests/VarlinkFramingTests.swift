import LockwipeProtocol
import Testing

@Suite struct VarlinkFramingTests {
    func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    @Test func aMessageEndsAtItsNULAndExcludesIt() {
        let b = bytes("{\"a\":1}\0{\"b\"")
        #expect(VarlinkFraming.next(in: b, maxMessageBytes: 100) == .message(0..<7))
        #expect(VarlinkFraming.next(in: b[8...], maxMessageBytes: 100) == .needMore)
    }

    @Test func emptyMessagesAreFramesToo() {
        #expect(VarlinkFraming.next(in: [UInt8(0), 0], maxMessageBytes: 10) == .message(0..<0))
    }

    @Test func theLimitAppliesToCompleteAndIncompleteMessages() {
        let exact = [UInt8](repeating: 0x41, count: 10) + [0]
        #expect(VarlinkFraming.next(in: exact, maxMessageBytes: 10) == .message(0..<10))
        #expect(VarlinkFraming.next(in: exact, maxMessageBytes: 9) == .tooLarge)
        let open = [UInt8](repeating: 0x41, count: 11)
        #expect(VarlinkFraming.next(in: open, maxMessageBytes: 10) == .tooLarge, "a message without terminator may not grow past the limit")
        #expect(VarlinkFraming.next(in: open.prefix(10), maxMessageBytes: 10) == .needMore)
    }

    @Test func indicesAreThoseOfTheSliceGiven() {
        let b = bytes("xx\0abc\0")
        #expect(VarlinkFraming.next(in: b[3...], maxMessageBytes: 100) == .message(3..<6))
    }
}
