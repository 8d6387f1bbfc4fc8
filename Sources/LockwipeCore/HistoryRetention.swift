/// What the audit history keeps of each registration, how a run of repeated refusals
/// becomes one event, and how large one history reply may grow (issue 40, finding 5:
/// docs/security.md, "History a user cannot weaponise").
///
/// - Every event's detail is at most `maxDetailBytes` (UTF-8), cut on a scalar boundary.
/// - A refusal that nothing counts (an offline code that does not read, none outstanding,
///   one inside the back-off) is `repeatable`: a run of them from one requester within
///   `repeatWindow` of its first is one event with a count (`merges`).
/// - Per registration at most `maxRepeatableEvents` repeatable events and
///   `maxStandardEvents` others are kept, none older than `maxAge`; a wipe's events (and
///   their certificates), a destroyed key and a registration's beginning and end are
///   `kept` whatever their number or age.
/// - A history reply carries at most `maxReplyBytes` of events (`eventBytes`), the newest.
///
/// Pure: the store applies it.
public enum HistoryRetention {
    /// How events of a kind are kept.
    public enum Rule: Sendable, Equatable {
        /// Never pruned.
        case kept
        /// What a user can cause at will without changing anything: offline-code challenges
        /// and refusals. A budget of their own, so that a flood of them never pushes out
        /// the rest of her history.
        case repeatable
        /// Everything else: pruned by count and age.
        case standard
    }

    public static let maxDetailBytes = 4_096
    public static let maxStandardEvents = 10_000
    public static let maxRepeatableEvents = 1_000
    /// 400 days, in seconds: a year of audit trail, and then some.
    public static let maxAge: Int64 = 400 * 86_400
    /// A run of repeated refusals is one event for up to an hour from its first.
    public static let repeatWindow: Int64 = 3_600
    /// What one `GetHistory` reply may carry (`eventBytes`): 4 MiB, a sixteenth of what a
    /// client accepts (`VarlinkClient.maxReplyBytes`), and bounded whatever is stored.
    public static let maxReplyBytes = 4 << 20

    public static func rule(for kind: EventKind) -> Rule {
        switch kind {
        case .wipe, .wipeIncomplete, .wipeStarted, .wipeResumed, .keyDestroyed, .register, .unregister: .kept
        case .offlineCodeRefused, .offlineCodeChallenge: .repeatable
        default: .standard
        }
    }

    /// How many events of `rule` a registration keeps (nil: all).
    public static func maxEvents(_ rule: Rule) -> Int? {
        switch rule {
        case .kept: nil
        case .repeatable: maxRepeatableEvents
        case .standard: maxStandardEvents
        }
    }

    /// What makes two refusals "the same" for aggregation.
    public struct RepeatKey: Sendable, Equatable {
        public var kind: EventKind
        public var trigger: Trigger?
        public var requesterUID: UInt32?
        public init(kind: EventKind, trigger: Trigger?, requesterUID: UInt32?) {
            self.kind = kind
            self.trigger = trigger
            self.requesterUID = requesterUID
        }
    }

    /// The newest event of a registration, as far as aggregation asks: its key, when its
    /// run began, and whether it is an aggregated refusal at all (`repeats` non-nil).
    public struct Newest: Sendable, Equatable {
        public var key: RepeatKey
        public var time: Int64
        public var repeats: Int?
        public init(key: RepeatKey, time: Int64, repeats: Int?) {
            self.key = key
            self.time = time
            self.repeats = repeats
        }
    }

    /// Whether a repeatable refusal `key` at `now` is counted into `newest` (the
    /// registration's newest event) instead of becoming an event of its own: only into
    /// an aggregated refusal of the same kind, trigger and requester, whose run began at
    /// most `repeatWindow` ago (not in the future: a clock set back starts a new one).
    public static func merges(_ key: RepeatKey, at now: Int64, into newest: Newest?) -> Bool {
        guard let newest, let repeats = newest.repeats, repeats < Int(Int32.max) else { return false }
        return newest.key == key && now >= newest.time && now - newest.time < repeatWindow
    }

    /// Whether the `count`th refusal of a run goes to the journal too: the first ten and
    /// every hundredth after. Each journal entry counts against journald's rate limit of
    /// the service (by default 10,000 in 30 s), past which it drops lockwiped's entries,
    /// locks and wipes among them: one user refusing herself codes as fast as she can
    /// would otherwise silence the audit of everyone (issue 40, suspected item). The
    /// history keeps the whole count.
    public static func journals(repeat count: Int) -> Bool {
        count <= 10 || count % 100 == 0
    }

    /// `detail` cut to at most `maxDetailBytes` of UTF-8 on a scalar boundary, saying so.
    public static func bounded(detail: String) -> String {
        let utf8 = detail.utf8
        guard utf8.count > maxDetailBytes else { return detail }
        let note = " … (cut: \(utf8.count) bytes)"
        var kept = ""
        var used = 0
        for scalar in detail.unicodeScalars {
            let size = UTF8.width(scalar)
            if used + size + note.utf8.count > maxDetailBytes { break }
            kept.unicodeScalars.append(scalar)
            used += size
        }
        return kept + note
    }

    /// An upper bound of what an event of these texts costs in a JSON reply: each text's
    /// UTF-8 bytes (6 for a byte JSON escapes as `\u00XX`), `certificateBytes` of its
    /// certificate, and 512 for the keys, numbers and the rest.
    public static func eventBytes(texts: [String], certificateBytes: Int) -> Int {
        var total = 512 + certificateBytes
        for text in texts {
            for byte in text.utf8 { total += byte < 0x20 || byte == 0x22 || byte == 0x5C || byte == 0x7F ? 6 : 1 }
        }
        return total
    }
}
