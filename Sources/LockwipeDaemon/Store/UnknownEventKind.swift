/// An event row whose kind is not an `EventKind` (written by a newer lockwiped).
struct UnknownEventKind: Error, CustomStringConvertible {
    var kind: String
    var id: Int64

    var description: String {
        "the state database holds an event of a kind this lockwiped does not know ('\(kind)', events row \(id)): was it written by a newer version?"
    }
}
