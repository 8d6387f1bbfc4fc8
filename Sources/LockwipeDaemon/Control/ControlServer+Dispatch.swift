import Foundation
import LockwipeCore
import LockwipeProtocol

extension ControlServer {
    /// What every request but status and service information gets during the start-up pass.
    static let startingUpRefusal =
        "lockwiped is finishing its start-up pass (resuming interrupted wipes and enforcing the policy for the time it was not running); try again when it has ended: lockwipectl status shows its progress"

    func dispatch(_ method: String, _ data: Data, peer: Peer) async throws -> Data {
        if isStartingUp, let m = ManagerMethod(rawValue: method) {
            // Status answers what the pass has done so far; the login gate (which asks for
            // status too) and every other verb wait for its end.
            var answered = false
            if m == .getStatus { answered = try VarlinkMessage.decodeParameters(StatusRequest.self, from: data).loginGate != true }
            if !answered { throw VarlinkError.startingUp(Self.startingUpRefusal) }
        }
        switch method {
        case "org.varlink.service.GetInfo":
            return try VarlinkMessage.encodeReply(
                ServiceInfo(
                    vendor: "lockwipe", product: "lockwiped", version: LockwipeVersion.current, url: "https://lockwipe.invalid/",
                    interfaces: [InterfaceDescription.serviceName, InterfaceDescription.managerName]))
        case "org.varlink.service.GetInterfaceDescription":
            let p = try VarlinkMessage.decodeParameters(InterfaceDescriptionRequest.self, from: data)
            switch p.interface {
            case InterfaceDescription.managerName: return try VarlinkMessage.encodeReply(InterfaceDescriptionReply(description: InterfaceDescription.manager))
            case InterfaceDescription.serviceName: return try VarlinkMessage.encodeReply(InterfaceDescriptionReply(description: InterfaceDescription.service))
            default: throw VarlinkError.interfaceNotFound(p.interface)
            }
        default: break
        }
        guard let m = ManagerMethod(rawValue: method) else {
            if method.hasPrefix(InterfaceDescription.managerName + ".") || method.hasPrefix(InterfaceDescription.serviceName + ".") {
                throw VarlinkError.methodNotFound(method)
            }
            let interface = method.split(separator: ".").dropLast().joined(separator: ".")
            throw VarlinkError.interfaceNotFound(interface)
        }
        let caller = try await peer.caller { await manager.caller($0) }

        switch m {
        case .getStatus:
            let p = try VarlinkMessage.decodeParameters(StatusRequest.self, from: data)
            var report = try await manager.status(for: caller, user: p.user)
            if isStartingUp {
                report.startingUp = true
                report.warnings.insert(
                    "lockwiped is finishing its start-up pass: what it shows may still change, and every request but status is refused until it has ended",
                    at: 0)
            }
            return try statusReplies.reply(report)
        case .getPolicy:
            return try VarlinkMessage.encodeReply(await manager.policyInfo())
        case .getHistory:
            let p = try VarlinkMessage.decodeParameters(HistoryRequest.self, from: data)
            return try VarlinkMessage.encodeReply(try await manager.history(for: caller, user: p.user, limit: p.limit ?? 1000, since: p.since))
        case .getCertificate:
            let p = try VarlinkMessage.decodeParameters(CertificateRequest.self, from: data)
            return try VarlinkMessage.encodeReply(CertificateReply(certificate: try await manager.certificate(for: caller, user: p.user, id: p.id)))
        case .lock:
            var p = try VarlinkMessage.decodeParameters(TargetSelection.self, from: data)
            if p.user == nil, p.all != true, !caller.isAdmin {
                // An ordinary user may lock only her own registration: naming none means it.
                p.user = try await onlyOwnRegistration(caller, verb: "lock")
            }
            let users = try await selection(p, caller: caller, verb: "lock", userMayTargetSelf: true)
            if p.preview == true {
                var previews: [ActionResult] = []
                for user in users { previews.append(try await manager.lockPreview(user: user)) }
                return try VarlinkMessage.encodeReply(ActionReply(results: previews))
            }
            var results: [ActionResult] = []
            for user in users {
                let trigger: Trigger = caller.isAdmin ? .admin : .user
                let reason = caller.isAdmin ? "locked by administrator uid \(caller.credentials.uid)" : "locked by the user"
                results.append(try await manager.lock(user: user, trigger: trigger, reason: reason))
            }
            return try VarlinkMessage.encodeReply(ActionReply(results: results))
        case .unlock:
            // Users may unlock their own encrypted vault with its passcode; the Manager
            // decides what each lock needs (README.md "Encrypted vaults", lockwipectl(1)).
            let p = try VarlinkMessage.decodeParameters(UnlockRequest.self, from: data)
            try await requireSelfOrAdmin(caller, p.user, "unlock")
            return try VarlinkMessage.encodeReply(
                ActionReply(results: [
                    try await manager.unlock(user: p.user, by: caller, passcode: p.passcode, newPasscode: p.newPasscode)
                ]))
        case .setPasscode:
            let p = try VarlinkMessage.decodeParameters(PasscodeRequest.self, from: data)
            try await requireSelfOrAdmin(caller, p.user, "set the passcode of")
            return try VarlinkMessage.encodeReply(
                ActionReply(results: [
                    try await manager.setPasscode(user: p.user, current: p.current, new: p.new, by: caller)
                ]))
        case .previewWipe:
            let p = try VarlinkMessage.decodeParameters(TargetSelection.self, from: data)
            // A user may survey her own vault whatever its protection (she may read it all
            // anyway); wiping it is another matter (`wipeTargets`).
            let targets = try await selection(p, caller: caller, verb: "survey a wipe of", userMayTargetSelf: true)
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
            return try VarlinkMessage.encodeReply(WipePreviewReply(previews: previews))
        case .wipe:
            let p = try VarlinkMessage.decodeParameters(TargetSelection.self, from: data)
            let users = try await wipeTargets(p, caller: caller)
            var results: [ActionResult] = []
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
            return try VarlinkMessage.encodeReply(ActionReply(results: results))
        case .register:
            let p = try VarlinkMessage.decodeParameters(RegisterRequest.self, from: data)
            try requireAdmin(caller, "register users")
            let credentials = ServerCredentials(
                token: p.token, clientCertificate: p.clientCertificate, clientKey: p.clientKey, refreshToken: p.refreshToken)
            return try VarlinkMessage.encodeReply(
                ActionReply(results: [
                    try await manager.register(
                        user: p.user, directories: p.directories, credentials: credentials.kind == "none" && p.clientKey == nil ? nil : credentials,
                        requireEncryption: p.requireEncryption ?? false, passcode: p.passcode, by: caller)
                ]))
        case .setCredentials:
            let p = try VarlinkMessage.decodeParameters(CredentialsRequest.self, from: data)
            try requireAdmin(caller, "set credentials")
            let credentials = ServerCredentials(
                token: p.token, clientCertificate: p.clientCertificate, clientKey: p.clientKey, refreshToken: p.refreshToken)
            return try VarlinkMessage.encodeReply(ActionReply(results: [try await manager.setCredentials(user: p.user, credentials, by: caller)]))
        case .unregister:
            let p = try VarlinkMessage.decodeParameters(UserParameter.self, from: data)
            try requireAdmin(caller, "unregister users")
            return try VarlinkMessage.encodeReply(ActionReply(results: [try await manager.unregister(user: p.user, by: caller)]))
        case .checkIn:
            let p = try VarlinkMessage.decodeParameters(UserFilter.self, from: data)
            let users: [String]
            if caller.isAdmin {
                users = try await manager.targets(user: p.user, all: p.user == nil)
            } else if let user = p.user {
                guard try await isOwn(user, caller) else { throw try await refusal(caller, verb: "check in") }
                users = try await manager.targets(user: user, all: false)
            } else {
                // Naming none: her own registrations, the only ones she may check in.
                users = try await manager.ownRegistrations(uid: caller.credentials.uid)
                if users.isEmpty { throw try await refusal(caller, verb: "check in") }
            }
            return try VarlinkMessage.encodeReply(ActionReply(results: try await manager.checkIn(users: users)))
        }
    }

    /// Whether `user`'s registration is the caller's own (`Ownership`: by uid).
    private func isOwn(_ user: String, _ caller: Caller) async throws -> Bool {
        guard let uid = try await manager.registrationUID(user) else { return false }
        return Ownership.isOwn(registrationUID: uid, callerUID: caller.credentials.uid)
    }

    private func requireSelfOrAdmin(_ caller: Caller, _ user: String, _ verb: String) async throws {
        if caller.isAdmin { return }
        guard try await isOwn(user, caller) else { throw try await refusal(caller, verb: verb) }
    }

    /// Why an ordinary user may not `verb` a registration that is not hers: that she has
    /// none at all, or that only her own is hers to act on.
    private func refusal(_ caller: Caller, verb: String) async throws -> VarlinkError {
        let who = caller.userName.map { "\($0) (uid \(caller.credentials.uid))" } ?? "uid \(caller.credentials.uid)"
        if try await manager.ownRegistrations(uid: caller.credentials.uid).isEmpty {
            return VarlinkError.notPermitted(
                "you have no registration (no data of \(who) is registered with lockwiped); only administrators may \(verb) other users' registrations")
        }
        return VarlinkError.notPermitted("you may only \(verb) your own registration")
    }

    /// The caller's one registration, for a verb an ordinary user may only direct at her
    /// own and that named none.
    private func onlyOwnRegistration(_ caller: Caller, verb: String) async throws -> String {
        let own = try await manager.ownRegistrations(uid: caller.credentials.uid)
        guard let first = own.first else { throw try await refusal(caller, verb: verb) }
        guard own.count == 1 else {
            throw VarlinkError.invalidParameter("user", reason: "you have \(own.count) registrations (\(own.joined(separator: ", "))): name the one to \(verb)")
        }
        return first
    }

    /// Whom a Wipe (or its preview) may target. "Forgot passcode": a user may wipe their
    /// own encrypted vault; anything else is for administrators.
    private func wipeTargets(_ p: TargetSelection, caller: Caller) async throws -> [String] {
        var own = false
        if !caller.isAdmin, p.all != true, let user = p.user, try await isOwn(user, caller),
            let r = try await manager.registration(user), r.protection == .encrypted
        {
            own = true
        }
        return try await selection(p, caller: caller, verb: "wipe", userMayTargetSelf: own)
    }

    private func requireAdmin(_ caller: Caller, _ what: String) throws {
        guard caller.isAdmin else { throw VarlinkError.notPermitted("only root and members of the admin group may \(what)") }
    }

    private func selection(_ p: TargetSelection, caller: Caller, verb: String, userMayTargetSelf: Bool) async throws -> [String] {
        let all = p.all ?? false
        if all == (p.user != nil) { throw VarlinkError.invalidParameter("user", reason: "give exactly one of user or all") }
        if !caller.isAdmin {
            guard userMayTargetSelf, !all, let user = p.user, try await isOwn(user, caller) else {
                if userMayTargetSelf, !all { throw try await refusal(caller, verb: verb) }
                throw VarlinkError.notPermitted(
                    userMayTargetSelf
                        ? "you may only \(verb) your own registration"
                        : "only root and members of the admin group may \(verb)")
            }
        }
        return try await manager.targets(user: p.user, all: all)
    }
}
