import LockwipeBase
import LockwipeCore
import LockwipeVaultIO

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

    /// What is pending in `r`'s outbox now (an open vault only: a locked one was sealed at
    /// its lock), counted in a vault call with its deadline; the problem in words when it
    /// cannot be counted.
    func pendingOutbox(_ r: RegistrationRecord) async -> (OutboxReader.Summary?, String?) {
        guard let relative = r.outbox ?? configuration.outbox.directory, r.state == .active else { return (nil, nil) }
        let limits = OutboxReader.Limits(maxBytes: configuration.outbox.maxBytes, maxFiles: configuration.outbox.maxFiles)
        let (vaults, uid) = (r.vaults, r.uid)
        do {
            let summary = try await vaultCalls.run(for: VaultOwner(registration: r.id, user: r.user), "counting the outbox") {
                try OutboxReader.walk(vaults: vaults, relative: relative, uid: uid, limits: limits)
            }
            return (summary, nil)
        } catch {
            return (nil, ErrorWords.of(error))
        }
    }

    /// What a copy of the disk gets of `r`'s vault now (`AtRest`); `key`: its key's status
    /// (`keyStatus`). Never waits for the machine key: while it is being opened (the
    /// start-up pass) its sealing is not known yet.
    func atRest(_ r: RegistrationRecord, key: VaultKeyStatus?) -> AtRest {
        AtRest.of(r.protection, passcodeAlone: key?.passcodeAlone ?? false, sealing: keys.machineKeyStateNow?.sealing)
    }
}
