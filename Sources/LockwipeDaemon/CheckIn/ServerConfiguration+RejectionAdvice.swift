import LockwipeCore

extension ServerConfiguration {
    /// What to check when this server rejects `r` with HTTP `status` (`RejectionAdvice`).
    func rejectionAdvice(_ r: RegistrationRecord, status: Int) -> String {
        RejectionAdvice.text(status: status, serverProtocol: serverProtocol, hasCredentials: r.server.hasCredentials, oauth: oauth != nil, user: r.user)
    }
}
