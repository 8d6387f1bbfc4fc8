import Testing

@testable import LockwipeCore

/// What the history keeps and aggregates (issue 40, finding 5), as tables.
struct HistoryRetentionTests {
    @Test(arguments: [
        (EventKind.wipe, HistoryRetention.Rule.kept), (.wipeIncomplete, .kept), (.wipeStarted, .kept), (.wipeResumed, .kept),
        (.keyDestroyed, .kept), (.register, .kept), (.unregister, .kept),
        (.offlineCodeRefused, .repeatable), (.offlineCodeChallenge, .repeatable),
        (.offlineCodeAccepted, .standard), (.lock, .standard), (.unlock, .standard), (.unlockFailed, .standard), (.serverPolicy, .standard),
    ])
    func eachKindHasItsRule(kind: EventKind, rule: HistoryRetention.Rule) {
        #expect(HistoryRetention.rule(for: kind) == rule)
    }

    @Test func onlyKeptEventsAreUncounted() {
        #expect(HistoryRetention.maxEvents(.kept) == nil)
        #expect(HistoryRetention.maxEvents(.repeatable) == 1_000)
        #expect(HistoryRetention.maxEvents(.standard) == 10_000)
    }

    static let alice = HistoryRetention.RepeatKey(kind: .offlineCodeRefused, trigger: .user, requesterUID: 1001)
    static func newest(_ key: HistoryRetention.RepeatKey = alice, time: Int64 = 1_000, repeats: Int? = 1) -> HistoryRetention.Newest {
        .init(key: key, time: time, repeats: repeats)
    }

    @Test(
        arguments: [
            // The same refusal by the same requester within the hour: counted into the run.
            (newest(), Int64(1_000), true),
            (newest(repeats: 41), 1_000 + 3_599, true),
            // The hour from the run's first is over: a new event.
            (newest(), 1_000 + 3_600, false),
            // A clock set back: a new event, never one that counts into a run "later".
            (newest(), 999, false),
            // The newest event is no run (a counted wrong code, a lock, ...) or there is none.
            (newest(repeats: nil), 1_000, false),
            (nil, 1_000, false),
            // Another requester, trigger or kind: a new event.
            (newest(.init(kind: .offlineCodeRefused, trigger: .user, requesterUID: 1002)), 1_000, false),
            (newest(.init(kind: .offlineCodeRefused, trigger: .admin, requesterUID: 1001)), 1_000, false),
            (newest(.init(kind: .offlineCodeChallenge, trigger: .user, requesterUID: 1001)), 1_000, false),
            // A run that has counted as far as the column holds: a new event.
            (newest(repeats: Int(Int32.max)), 1_000, false),
        ] as [(HistoryRetention.Newest?, Int64, Bool)])
    func aRefusalMergesOnlyIntoARunOfTheSame(newest: HistoryRetention.Newest?, now: Int64, merges: Bool) {
        #expect(HistoryRetention.merges(Self.alice, at: now, into: newest) == merges)
    }

    @Test func aDetailIsCutOnAScalarBoundaryAndSaysSo() {
        #expect(HistoryRetention.bounded(detail: "short") == "short")
        let exact = String(repeating: "a", count: HistoryRetention.maxDetailBytes)
        #expect(HistoryRetention.bounded(detail: exact) == exact)
        // "ß" is two bytes: a cut never splits one.
        let long = String(repeating: "ß", count: 30_000)
        let cut = HistoryRetention.bounded(detail: long)
        #expect(cut.utf8.count <= HistoryRetention.maxDetailBytes)
        #expect(cut.hasPrefix("ßßß") && cut.hasSuffix(" … (cut: 60000 bytes)"))
        #expect(cut.unicodeScalars.filter { $0 == "ß" }.count > 2_000)
        // One grapheme cluster of 60 KB (a letter and its combining marks) is cut too.
        let cluster = "A" + String(repeating: "\u{301}", count: 30_000)
        #expect(HistoryRetention.bounded(detail: cluster).utf8.count <= HistoryRetention.maxDetailBytes)
    }

    @Test func anEventCostsItsTextsEscapedAndItsCertificate() {
        #expect(HistoryRetention.eventBytes(texts: [], certificateBytes: 0) == 512)
        #expect(HistoryRetention.eventBytes(texts: ["abc", "/srv"], certificateBytes: 100) == 512 + 100 + 7)
        // What JSON escapes as \u00XX (or \" and \\) counts six bytes.
        #expect(HistoryRetention.eventBytes(texts: ["\u{1}\"\\"], certificateBytes: 0) == 512 + 18)
        #expect(HistoryRetention.eventBytes(texts: ["ß"], certificateBytes: 0) == 514)
    }

    /// The journal has a run's first ten refusals and every hundredth after (journald's
    /// rate limit is the service's, not the user's).
    @Test(arguments: [(1, true), (10, true), (11, false), (99, false), (100, true), (101, false), (1_500, true), (1_550, false)])
    func aRunOfRefusalsIsJournalledSparingly(count: Int, journalled: Bool) {
        #expect(HistoryRetention.journals(repeat: count) == journalled)
    }
}
