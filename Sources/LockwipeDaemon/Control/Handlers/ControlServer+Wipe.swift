import LockwipeCore
import LockwipeProtocol

/// `Wipe`, `PreviewWipe`.
extension ControlServer {
    /// "Forgot passcode": a user may wipe her own encrypted vault; anything else is for
    /// administrators (`WhoMay`).
    func wipe(_ p: TargetSelection, caller: Caller) async throws -> ActionReply {
        let users = try await users(authorize(.wipe, caller, user: p.user, all: p.all ?? false))
        var results: [Outcome] = []
        let (trigger, reason): (Trigger, String) =
            caller.isAdmin
            ? (.admin, "wiped by administrator uid \(caller.credentials.uid)") : (.user, "wiped by the user (forgotten passcode or their own choice)")
        let requester = WipeRequester(peerUID: caller.credentials.uid)
        for user in users {
            let requested = ContinuousClock.now
            results.append(
                try await manager.perform(on: user) { turn in
                    try await turn.registration.wipe(in: turn, trigger: trigger, reason: reason, requester: requester, requested: requested)
                })
        }
        return ActionReply(results)
    }

    /// A user may survey her own vault whatever its protection (she may read it all
    /// anyway); wiping it is another matter.
    func previewWipe(_ p: TargetSelection, caller: Caller) async throws -> WipePreviewReply {
        let targets = try await users(authorize(.previewWipe, caller, user: p.user, all: p.all ?? false))
        // One dry-run per caller at a time: a survey counts a whole vault, and a user's
        // connections must not turn into as many walks of it.
        let uid = caller.credentials.uid
        guard dryRuns.withLock({ $0.insert(uid).inserted }) else {
            let who = caller.userName.map { "\($0) (uid \(uid))" } ?? "uid \(uid)"
            throw ManagerError.actionFailed(
                "a wipe dry-run by \(who) is already running: one at a time per user; try again when it has finished")
        }
        defer { _ = dryRuns.withLock { $0.remove(uid) } }
        var previews: [WipePreview] = []
        for user in targets { previews += WipePreview.of(try await manager.look(at: user) { registration, r in try await registration.wipePlan(r) }) }
        return WipePreviewReply(previews: previews)
    }
}
