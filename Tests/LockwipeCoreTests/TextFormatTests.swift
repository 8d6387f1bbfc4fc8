import Foundation
import Testing

@testable import LockwipeCore

/// LockwipeCore and lockwipectl dropped full Foundation (ICU) for these helpers; their
/// output must stay what Foundation gave, so each is checked against Foundation itself.
@Suite struct TextFormatTests {
    static let values: [Double] = [
        0, 0.05, 0.25, 0.5, 1.5, 2.5, 2.25, 2.35, 9.95, 99.95, 1023.96, 0.0004999, 0.0005,
        123_456.789, 1e15 + 0.5, -0.05, -2.5, 4.4999999, 1.0 / 3.0, 511.999, 3_000_000.123,
    ]

    @Test(arguments: [0, 1, 2, 3])
    func fixedRoundsAsStringFormat(decimals: Int) {
        for value in Self.values {
            #expect(TextFormat.fixed(value, decimals: decimals) == String(format: "%.\(decimals)f", value), "\(value)")
        }
    }

    @Test func paddedFillsWithSpacesAndNeverCuts() {
        #expect(TextFormat.padded("ab", to: 5) == "ab   ")
        // Issue 42: "1 entries" read as a slip; a count takes its noun's number.
        #expect(TextFormat.count(1, "entry", "entries") == "1 entry")
        #expect(TextFormat.count(0, "entry", "entries") == "0 entries")
        #expect(TextFormat.count(UInt64(2), "file", "files") == "2 files")
        #expect(TextFormat.padded("abcdef", to: 3) == "abcdef")
        #expect(TextFormat.padded("été", to: 4) == "été ")
        #expect(TextFormat.padded("alice", to: 9) == "alice".padding(toLength: 9, withPad: " ", startingAt: 0))
    }

    @Test(arguments: ["  alice \t", "\tTRAFFIC_REG_LOCKED ", "x", "", "   ", " a b ", "\u{00A0}true\u{2003}", "tok\n", "\n tok \r\n"])
    func trimmingMatchesFoundation(text: String) {
        #expect(text.trimmingBlanks() == text.trimmingCharacters(in: .whitespaces))
        #expect(text.trimmingWhitespace() == text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test(arguments: ["alice", "a b/c", "ünïcødé", "x%y", "d.o-t_t~e", "日本", "a+b=c&d", "emoji😀", "tab\tnl\n"])
    func percentEncodingMatchesFoundation(user: String) {
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
        #expect(ServerURL.percentEncoded(user) == user.addingPercentEncoding(withAllowedCharacters: allowed))
    }
}
