import LockwipeCore

/// What `status` reads of one registration besides its record.
extension RegistrationContext {
    /// The key of an encrypted vault for `status`; nil for a permission vault, or when it
    /// cannot be read (status still answers, only the key fields are left out).
    func keyStatus(_ r: RegistrationRecord) async -> VaultKeyStatus? {
        guard r.protection == .encrypted else { return nil }
        do {
            return try await store.vaultKeyStatus(registration: r.id)
        } catch {
            stateNotice("status of \(r.user): the key fields are left out", user: r.user, error)
            return nil
        }
    }
}
