import Testing

@testable import LockwipeDaemon

@Suite struct TimestampTests {
    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00Z"),
        (1_700_000_000, "2023-11-14T22:13:20Z"),
        (-1, "1969-12-31T23:59:59Z"),
        (253_402_300_799, "9999-12-31T23:59:59Z"),
        (-58_979_923_200, "0101-01-01T00:00:00Z"),
    ])
    func isoIsUTCWithZeroPaddedFields(seconds: Int64, expected: String) {
        #expect(Timestamp.iso(seconds) == expected)
    }
}
