import LockwipeCheckIn
import LockwipeCore
import LockwipeProtocol

/// `Register`, `SetCredentials`, `Unregister` (administrators only), `CheckIn`.
extension ControlServer {
    func register(_ p: RegisterRequest, caller: Caller) async throws -> ActionReply {
        _ = try await authorize(.register, caller, user: p.user)
        let credentials = ServerCredentials(token: p.token, clientCertificate: p.clientCertificate, clientKey: p.clientKey, refreshToken: p.refreshToken)
        return ActionReply([
            try await manager.register(
                user: p.user, directories: p.directories, credentials: credentials.kind == "none" && p.clientKey == nil ? nil : credentials,
                requireEncryption: p.requireEncryption ?? false, passcode: p.passcode, outbox: p.outbox, by: caller)
        ])
    }

    func setCredentials(_ p: CredentialsRequest, caller: Caller) async throws -> ActionReply {
        _ = try await authorize(.setCredentials, caller, user: p.user)
        let credentials = ServerCredentials(token: p.token, clientCertificate: p.clientCertificate, clientKey: p.clientKey, refreshToken: p.refreshToken)
        let problems = CheckInClient.credentialProblems(credentials)
        if !problems.isEmpty { throw ManagerError.invalidParameter("credentials", reason: problems.joined(separator: "; ")) }
        // Then a check-in with them at once.
        let (outcome, id) = try await manager.perform(on: p.user) { turn in
            (try await turn.registration.setCredentials(credentials, in: turn, by: caller), turn.registration.id)
        }
        await manager.scheduleCheckIn(id, of: p.user, in: 0)
        return ActionReply([outcome])
    }

    func unregister(_ p: UserParameter, caller: Caller) async throws -> ActionReply {
        _ = try await authorize(.unregister, caller, user: p.user)
        return ActionReply([try await manager.unregister(user: p.user, by: caller)])
    }

    /// Naming none: every registration for an administrator, all of her own for a user.
    func checkIn(_ p: UserFilter, caller: Caller) async throws -> ActionReply {
        let users = try await users(authorize(.checkIn, caller, user: p.user))
        return ActionReply(try await manager.checkIn(users: users))
    }
}
