import Foundation
import LockwipeCore
import Testing

/// The daemon's timestamps read and written without Foundation agree with Foundation;
/// anything else is left to Foundation (nil).
@Suite struct ISOTimestampTests {
    @Test(arguments: [
        "1970-01-01T00:00:00Z", "2026-11-23T20:31:05Z", "2000-02-29T23:59:59Z", "2024-02-29T12:00:00Z",
        "2100-03-01T00:00:00Z", "1999-12-31T23:59:59Z", "2038-01-19T03:14:08Z", "2026-12-31T00:00:01Z",
    ])
    func readsTheDaemonsTimestampsAsFoundationDoes(_ text: String) throws {
        let expected = Int64(try Date(text, strategy: .iso8601).timeIntervalSince1970)
        #expect(ISOTimestamp.seconds(text) == expected)
    }

    @Test(arguments: [
        "1970-01-01T00:00:00Z", "2026-11-23T20:31:05Z", "2000-02-29T23:59:59Z", "2024-02-29T12:00:00Z",
        "2100-03-01T00:00:00Z", "1999-12-31T23:59:59Z", "2038-01-19T03:14:08Z", "2026-12-31T00:00:01Z", "2400-02-29T01:02:03Z",
    ])
    func writesWhatFoundationWrites(_ text: String) throws {
        let seconds = Int64(try Date(text, strategy: .iso8601).timeIntervalSince1970)
        #expect(ISOTimestamp.text(seconds) == Date(timeIntervalSince1970: Double(seconds)).formatted(.iso8601))
        #expect(ISOTimestamp.text(seconds) == text)
    }

    @Test(arguments: [
        "", "2026-11-23", "2026-11-23T20:31:05", "2026-11-23T20:31:05+01:00", "2026-11-23T20:31:05.5Z",
        "2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z", "2026-11-31T00:00:00Z", "2026-11-23T24:00:00Z",
        "2026-11-23T20:60:00Z", "2026-11-23T20:31:60Z", "2026-11-23 20:31:05Z", "２026-11-23T20:31:05Z", "1969-12-31T23:59:59Z",
    ])
    func leavesEverythingElseToFoundation(_ text: String) {
        #expect(ISOTimestamp.seconds(text) == nil)
    }
}
