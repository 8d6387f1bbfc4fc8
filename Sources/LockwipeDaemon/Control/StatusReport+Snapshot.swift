import LockwipeBase
import LockwipeCore
import LockwipeProtocol

/// `status` on the wire: the Manager's `StatusSnapshot` turned into the `StatusReport`
/// clients have always read (the golden tests keep its keys), with the warnings an
/// operator must read (`StatusWarnings`).
extension StatusReport {
    init(_ s: StatusSnapshot) {
        let infos = s.registrations.map { RegistrationInfo($0, reading: s.reading, server: s.server) }
        let warnings = StatusWarnings.list(
            s.records, server: s.server, adminGroup: s.missingAdminGroup, logout: s.logoutWarnings,
            connectionProblems: infos.compactMap { info in info.sapConnectionProblem.map { (info.user, $0) } }, rejectedReload: s.rejectedReload,
            serverResets: infos.compactMap { info in info.sapReset.map { (info.user, $0.connection, $0.deleteResult, $0.enrol) } },
            policyNotes: infos.compactMap { info in info.serverPolicyNote.map { (info.user, $0) } })
        let leaseRefusals = s.records.compactMap { r in r.leaseRefused.map { "\(r.user): \($0)" } }
        self.init(
            version: LockwipeVersion.current, server: ServerInfo(configured: s.server.isConfigured, url: s.server.url, insecureHttp: s.server.usesInsecureHTTP),
            policy: PolicyInfo(policy: s.policy, source: s.policySource, warnBeforeSeconds: s.warnBefore), registrations: infos,
            warnings: warnings + leaseRefusals + StatusWarnings.atRest(s.registrations.map { ($0.record.user, $0.atRest) }, machineKey: s.machineKey))
        machineKey = s.machineKey.map { MachineKeyInfo(sealing: $0.sealing, problem: $0.problem, recoveryKey: $0.recoveryKey) }
    }
}

extension RegistrationInfo {
    init(_ e: StatusSnapshot.Entry, reading: ClockReading, server: ServerConfiguration) {
        let r = e.record
        self.init(
            user: r.user, uid: r.uid, state: r.state, protection: r.protection, directories: r.directories,
            blocked: r.blocked, lastContact: Timestamp.iso(r.clock.lastContact), offlineSeconds: e.offline,
            nextAction: e.next.map { NextAction(action: $0.action, at: Timestamp.iso(reading.wall + $0.inSeconds)) },
            lockTrigger: r.state.isLockCommitted ? r.lockTrigger : nil, wipe: r.lastWipe,
            wipeProgress: e.runningWipe?.info())
        policy = PolicyInfo(policy: e.policy, source: e.policySource)
        policySource = e.policySource
        blockedCode = r.blocked ? r.server.blockedCode : nil
        lastAttempt = r.server.lastAttempt.map(Timestamp.iso)
        if let status = r.server.rejectedStatus {
            rejected = RejectionInfo(
                httpStatus: status, text: r.server.rejectedText ?? "", since: r.server.rejectedSince.map(Timestamp.iso),
                check: server.rejectionAdvice(r, status: status))
        }
        lastError = r.server.lastAttempt == nil ? nil : r.server.lastError
        nextCheckIn = e.nextCheckIn.map(Timestamp.iso)
        credentials = r.server.credentials
        if let c = e.connection {
            sapConnection = c.id
            sapConnectionProblem = c.problem
            if let at = c.resetAt {
                sapReset = ServerResetInfo(
                    at: Timestamp.iso(at), connection: c.resetConnection, deleteResult: c.resetResult ?? "pending",
                    enrol: ServerReset.enrolCommands(user: r.user, oauth: server.oauth != nil))
            }
        }
        passcodePolicy = r.server.settings?.passcode
        if ServerPolicyAbsence.isAbsent(protocol: server.serverProtocol, r.server.settings) { serverPolicyNote = ServerPolicyAbsence.note }
        if server.serverProtocol == .sapMobileServices { sapPasswordPolicyLockTimeout = r.server.settings?.sapLockTimeout }
        sharedDevice = r.server.settings?.sharedDevice
        logoutLockAt = e.logoutLockAt.map(Timestamp.iso)
        vaultError = r.vaultError
        registrationId = r.id.rawValue
        atRest = e.atRest
        if let o = e.outbox {
            outbox = OutboxInfo(
                directory: o.directory, pendingFiles: o.pending?.files, pendingBytes: o.pending?.bytes, pendingOldest: o.pending?.oldest.map(Timestamp.iso),
                pendingProblem: o.pendingProblem, sealedKept: o.kept.count, sealedKeptBytes: o.kept.reduce(0) { $0 + $1.bytes },
                lastSealed: o.lastSealed.map(Timestamp.iso), lastUploaded: o.lastUploaded.map(Timestamp.iso))
        }
        if let lease = r.lease {
            let left = lease.remaining(r.clock, offline: e.offline)
            self.lease = LeaseInfo(
                until: Timestamp.iso(lease.until), grantedAt: Timestamp.iso(lease.grantedAt), source: lease.source.rawValue, reference: lease.reference,
                inForce: left > 0, remainingSeconds: left, endedAt: lease.endedAt.map(Timestamp.iso))
        }
        if let waits = e.lockWaitsFor {
            // Liftable by a contact: a policy lock's alone.
            if PolicyLockLift.Lock(state: r.state, trigger: r.lockTrigger, liftable: r.lockLiftable).isPolicyLock { lockLiftable = r.lockLiftable }
            lockWaitsFor = waits
        }
        if case .warn(let w) = e.warning {
            warning = WarningInfo(action: w.action, at: Timestamp.iso(reading.wall + w.inSeconds), inSeconds: w.inSeconds)
        }
        if let key = e.key {
            keyWrapping = key.wrapping.rawValue
            if key.wrapping == .passcode, e.passcodePolicy.expirationDays > 0, let setAt = key.passcodeSetAt {
                passcodeExpires = Timestamp.iso(setAt + Int64(e.passcodePolicy.expirationDays) * 86_400)
            }
            failedUnlocks = key.failedAttempts
            retryLimit = e.passcodePolicy.retryLimit
        }
    }
}

extension HistoryReply {
    init(_ page: HistoryPage) {
        self.init(
            events: page.events.map {
                let run = $0.repeats.flatMap { $0 > 1 ? $0 : nil }
                return HistoryEvent(
                    time: Timestamp.iso($0.time), user: $0.user, kind: $0.kind.rawValue, trigger: $0.trigger, detail: $0.detail,
                    certificate: $0.certificate.flatMap { page.certificates[$0] }, uid: $0.uid, registrationId: $0.registrationID?.rawValue,
                    requester: $0.requester.map { HistoryEvent.Requester(uid: $0.uid, pid: $0.pid, comm: $0.comm) }, repeats: run,
                    lastTime: run == nil ? nil : $0.lastTime.map(Timestamp.iso))
            }, truncated: page.truncated ? true : nil)
    }
}
