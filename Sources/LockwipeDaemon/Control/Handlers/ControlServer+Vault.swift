import LockwipeCore
import LockwipeProtocol

/// `Lock`, `Unlock`, `SetPasscode`.
extension ControlServer {
    func lock(_ p: TargetSelection, caller: Caller) async throws -> ActionReply {
        // One named registration is not looked up here: the lock finds it once, and says
        // when there is none.
        let targets = try await authorize(.lock, caller, user: p.user, all: p.all ?? false)
        let users = if case .user(let user) = targets { [user] } else { try await users(targets) }
        if p.preview == true {
            var previews: [Outcome] = []
            for user in users { previews.append(try await manager.look(at: user) { registration, r in try await registration.lockPreview(r, byAdmin: caller.isAdmin) }) }
            return ActionReply(previews)
        }
        var results: [Outcome] = []
        for user in users {
            let trigger: Trigger = caller.isAdmin ? .admin : .user
            let reason = caller.isAdmin ? "locked by administrator uid \(caller.credentials.uid)" : "locked by the user"
            results.append(try await manager.perform(on: user) { turn in try await turn.registration.lock(in: turn, trigger: trigger, reason: reason) })
        }
        return ActionReply(results)
    }

    /// Users may unlock their own encrypted vault with its passcode; what each lock needs
    /// is decided in the user's turn (`UnlockRule`; README.md "Encrypted vaults", lockwipectl(1)).
    func unlock(_ p: UnlockRequest, caller: Caller) async throws -> ActionReply {
        let user = user(try await authorize(.unlock, caller, user: p.user))
        return ActionReply([try await manager.unlock(user: user, by: caller, passcode: p.passcode, newPasscode: p.newPasscode)])
    }

    /// The PAM auth stack's password for the uid's registrations (root only: `WhoMay`).
    func liftAtLogin(_ p: LoginLiftRequest, caller: Caller) async throws -> ActionReply {
        _ = try await authorize(.liftAtLogin, caller, user: nil)
        return ActionReply(try await manager.liftAtLogin(uid: p.uid, password: p.password, by: caller))
    }

    func setPasscode(_ p: PasscodeRequest, caller: Caller) async throws -> ActionReply {
        let user = user(try await authorize(.setPasscode, caller, user: p.user))
        let (current, new) = (p.current, p.new)
        return ActionReply([
            try await manager.perform(on: user) { turn in try await turn.registration.setPasscode(in: turn, current: current, new: new, by: caller) }
        ])
    }
}
