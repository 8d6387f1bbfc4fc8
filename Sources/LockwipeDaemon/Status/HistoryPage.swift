import LockwipeCore

/// One page of history for `history`: the events, newest last, with the certificates they
/// name and whether older events were left out. `Control/` builds the `HistoryReply`.
struct HistoryPage: Sendable {
    var events: [StoredEvent]
    var certificates: [String: SanitizationCertificate]
    var truncated: Bool
}
