import LockwipeCore

/// A registration's credentials for the policy server, replaced by an administrator
/// (`SetCredentials`; checked before by `CheckInClient.credentialProblems`).
extension Registration {
    /// Replaces the credentials of the registration whose turn this is, with its history event.
    nonisolated(nonsending) func setCredentials(_ credentials: ServerCredentials, in turn: borrowing RegistrationTurn, by caller: Caller) async throws -> Outcome {
        let user = turn.user
        let now = context.clock.now().wall
        try await context.store.setCredentials(
            turn.held, credentials,
            event: context.event(
                user, .credentials, .admin,
                "credentials replaced (now: \(credentials.kind))", at: now))
        context.logger.notice(
            "credentials of \(user) replaced",
            metadata: [
                "message_id": MessageID.credentialsChanged.metadata, "user": .string(user), "action": "credentials",
                "credentials": .string(credentials.kind), "peer_uid": "\(caller.credentials.uid)",
            ])
        return Outcome(user: user, operation: .credentials, state: nil, reason: "credentials replaced (\(credentials.kind))")
    }
}
