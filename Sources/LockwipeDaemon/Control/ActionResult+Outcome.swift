import LockwipeProtocol

/// The domain's `Outcome` on the wire: the one place an operation's result becomes an
/// `ActionResult`. `failed` and `lifted` are present only when true, as they always were.
extension ActionResult {
    init(_ outcome: Outcome) {
        self.init(
            user: outcome.user, action: outcome.operation.rawValue, state: outcome.state, detail: outcome.reason, wipe: outcome.wipe,
            failed: outcome.failed ? true : nil,
            processes: outcome.processes?.map { ProcessEntry(pid: $0.pid, comm: $0.comm, uid: $0.uid) },
            lifted: outcome.lift != nil ? true : nil)
    }
}

extension ActionReply {
    init(_ outcomes: [Outcome]) {
        self.init(results: outcomes.map(ActionResult.init))
    }
}
