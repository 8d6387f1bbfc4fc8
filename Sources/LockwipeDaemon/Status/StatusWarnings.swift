import LockwipeCore

/// The warnings `status` shows an operator, decided from what it reports (no I/O), in a
/// fixed order: the daemon's configuration first, then registration by registration.
enum StatusWarnings {
    /// `adminGroup`: the configured admin group when it does not exist (nil when it does);
    /// `logout`: the lock-on-logout warnings (`LogoutLocks.warnings`);
    /// `connectionProblems`: why a registration has no SAP application connection yet;
    /// `rejectedReload`: the problems of the last reload, when it was rejected.
    static func list(
        _ registrations: [RegistrationRecord], server: ServerConfiguration, adminGroup missingAdminGroup: String?, logout: [String],
        connectionProblems: [(user: String, problem: String)] = [], rejectedReload: [String] = [],
        serverResets: [(user: String, connection: String?, deleteResult: String, enrol: String)] = [], policyNotes: [(user: String, note: String)] = []
    ) -> [String] {
        var warnings: [String] = []
        for problem in rejectedReload {
            warnings.append(
                "the last configuration reload was rejected and the previous configuration is still in force: \(problem) (fix it, check with lockwiped --check-config, and reload again)"
            )
        }
        if !server.isConfigured {
            warnings.append("no policy server is configured: offline clocks restart only when an administrator unlocks a registration")
        }
        if server.usesInsecureHTTP {
            warnings.append(
                "the policy server is reached over plain http:// (allow_insecure_http = true): any local user who binds that port first receives every token and can order locks and wipes; use https://"
            )
        }
        if let missingAdminGroup {
            warnings.append("the admin group '\(missingAdminGroup)' does not exist: only root is an administrator")
        }
        warnings += logout
        for r in registrations where r.state == .lockFailed {
            warnings.append("the lock of \(r.user) FAILED and is not in force; it is retried: \(r.vaultError ?? "see the journal")")
        }
        for r in registrations where r.state != .lockFailed {
            if let error = r.vaultError { warnings.append("the vault of \(r.user) cannot be reached: \(error)") }
        }
        for r in registrations where r.state == .wipePending {
            warnings.append("the wipe of \(r.user) is pending (incomplete or interrupted); it is retried at start-up")
        }
        for r in registrations where r.state == .wiped {
            if let step = r.state.nextStep(user: r.user) { warnings.append(step) }
        }
        for (user, resetConnection, deleteResult, enrol) in serverResets {
            let connection = resetConnection.map { "connection \($0): \(deleteResult)" } ?? deleteResult
            warnings.append(
                "\(user) must be enrolled again: SAP full reset after the wipe (token, refresh token and connection id forgotten; \(connection)): \(enrol)"
            )
        }
        for (user, note) in policyNotes {
            warnings.append("\(user): \(note)")
        }
        for r in registrations where r.blocked {
            warnings.append("\(r.user) is blocked by the policy server (\(r.server.blockedCode ?? "blocked")); its data is untouched")
        }
        for r in registrations where !r.state.isWipeCommitted {
            guard let status = r.server.rejectedStatus else { continue }
            warnings.append(
                "\(r.user) is rejected by the policy server (HTTP \(status): \(r.server.rejectedText ?? "")): it is reached but refuses this machine, "
                    + "so the offline clock runs on; \(server.rejectionAdvice(r, status: status))")
        }
        for (user, problem) in connectionProblems {
            warnings.append("\(user) has no SAP application connection yet: \(problem)")
        }
        if server.isConfigured {
            for r in registrations where r.server.failures > 0 && !r.state.isWipeCommitted && r.server.rejectedStatus == nil {
                warnings.append("check-in of \(r.user) failed \(r.server.failures) time(s) in a row: \(r.server.lastError ?? "unknown error")")
            }
        }
        return warnings
    }
}

extension StatusWarnings {
    /// The machine key that cannot be opened, and the encrypted vaults a copy of the disk
    /// opens (a host key or a plain machine key). Permission vaults are not warned about
    /// one by one: `at_rest` says "none" for each.
    static func atRest(_ registrations: [(user: String, atRest: AtRest?)], machineKey: StatusSnapshot.MachineKey?) -> [String] {
        guard let machineKey else { return [] }  // still being opened (the start-up pass)
        var warnings: [String] = []
        if let problem = machineKey.problem {
            let way =
                machineKey.recoveryKey == nil
                ? "undo the change (firmware, TPM) and restart lockwiped"
                : "undo the change (firmware, TPM) and restart lockwiped, or bring the vaults back with the organisation's recovery key (lockwipectl recover --key-file FILE)"
            warnings.append("the machine key cannot be opened (\(problem)): every encrypted vault it wraps stays locked and nothing is destroyed; \(way)")
        } else if machineKey.sealing == .tpm2, machineKey.recoveryKey == nil {
            warnings.append(Manager.noRecoveryKey)
        }
        let opened = registrations.filter { $0.atRest == .host || $0.atRest == .disk }.map(\.user)
        if !opened.isEmpty, machineKey.problem == nil {
            let how = machineKey.sealing == .host ? "sealed with the host key only (no TPM2)" : "a plain file"
            warnings.append("the machine key is \(how): a copy of the disk opens the vaults of \(opened.joined(separator: ", "))")
        }
        return warnings
    }
}
