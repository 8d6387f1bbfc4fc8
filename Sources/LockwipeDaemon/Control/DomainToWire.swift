import LockwipeProtocol
import LockwipeWipe

/// The domain's values on the wire, as homed's `-varlink.c` files turn a Home into JSON:
/// the one place an operation's `Outcome` becomes an `ActionResult` (`failed` and `lifted`
/// present only when true, as they always were), the offline codes' status becomes
/// `OfflineCodesInfo` and a `WipePlan` its `WipePreview`s.
extension ActionResult {
    init(_ outcome: Outcome) {
        self.init(
            user: outcome.user, action: outcome.operation.rawValue, state: outcome.state, detail: outcome.reason, wipe: outcome.wipe,
            failed: outcome.failed ? true : nil,
            processes: outcome.processes?.map { ProcessEntry(pid: $0.pid, comm: $0.comm, uid: $0.uid) },
            lifted: outcome.lift != nil ? true : nil, undo: outcome.undo?.text, undoneByAsker: outcome.undo?.byAsker)
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

extension WipePreview {
    /// One preview per vault of the plan.
    static func of(_ plan: WipePlan) -> [WipePreview] {
        let method: Method =
            switch plan.method {
            case .cryptoErase: .cryptoErase
            case .overwrite: .overwrite
            case .unlink: .unlink
            }
        return plan.surveys.map { s in
            WipePreview(
                user: plan.user, path: s.path, method: method, passes: plan.passes, pattern: plan.pattern, files: s.census.files,
                bytes: s.census.bytes, directories: s.census.directories, otherEntries: s.census.otherEntries, mountPoints: s.census.mountPoints,
                partial: s.census.truncated, media: s.media, caveats: s.caveats, problem: s.problem)
        }
    }
}
