import LockwipeProtocol

/// The domain's values on the wire, as homed's `-varlink.c` files turn a Home into JSON:
/// the one place an operation's `Outcome` becomes an `ActionResult` (`failed` and `lifted`
/// present only when true, as they always were) and the offline codes' status becomes
/// `OfflineCodesInfo`.
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

extension OfflineCodesInfo {
    init(_ status: OfflineCodesStatus) {
        self.init(provisioned: status.provisioned, machine: status.machine, provisionEpoch: status.provisionEpoch)
    }
}
