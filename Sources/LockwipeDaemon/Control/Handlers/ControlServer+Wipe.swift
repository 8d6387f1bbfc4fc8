import LockwipeCore
import LockwipeProtocol

/// `Wipe`, `PreviewWipe`.
extension ControlServer {
    /// "Forgot passcode": a user may wipe her own encrypted vault; anything else is for
    /// administrators (`WhoMay`).
    func wipe(_ p: TargetSelection, caller: Caller) async throws -> ActionReply {
        let users = try await users(authorize(.wipe, caller, user: p.user, all: p.all ?? false))
        var results: [Outcome] = []
        for user in users {
            results.append(
                caller.isAdmin
                    ? try await manager.wipe(
                        user: user, trigger: .admin, reason: "wiped by administrator uid \(caller.credentials.uid)",
                        requester: WipeRequester(peerUID: caller.credentials.uid))
                    : try await manager.wipe(
                        user: user, trigger: .user, reason: "wiped by the user (forgotten passcode or their own choice)",
                        requester: WipeRequester(peerUID: caller.credentials.uid)))
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
        for user in targets { previews += try await manager.previewWipe(user: user) }
        return WipePreviewReply(previews: previews)
    }
}
