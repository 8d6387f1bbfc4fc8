import Foundation
import LockwipeCore
import LockwipeProtocol

extension ControlServer {
    /// What every request but status and service information gets during the start-up pass.
    static let startingUpRefusal =
        "lockwiped is finishing its start-up pass (resuming interrupted wipes and enforcing the policy for the time it was not running); try again when it has ended: lockwipectl status shows its progress"

    /// Every method the control socket serves, each bound to its handler by its declaration
    /// (`ManagerMethods`, `ServiceMethods`), as systemd's `sd_varlink_server_bind_method_many`.
    /// The handlers (`Control/Handlers/`) decode nothing themselves and authorize first
    /// (`WhoMay`); a method that is declared but not bound here fails a unit test.
    static let bindings = MethodTable([
        .service(ServiceMethods.getInfo) { server, _ in server.getInfo() },
        .service(ServiceMethods.getInterfaceDescription) { server, p in try server.getInterfaceDescription(p) },
        .manager(ManagerMethods.getStatus, duringStartUp: .answeredUnless { $0.loginGate == true }, encode: { try $0.statusReplies.reply($1) }) {
            try await $0.getStatus($1, caller: $2)
        },
        .manager(ManagerMethods.getPolicy) { server, _, _ in
            let (policy, source) = try await server.manager.policyInForce()
            return PolicyInfo(policy: policy, source: source, warnBeforeSeconds: Int64(await server.manager.currentConfiguration.warnBeforeSeconds))
        },
        .manager(ManagerMethods.getHistory) { try await $0.getHistory($1, caller: $2) },
        .manager(ManagerMethods.getCertificate) { try await $0.getCertificate($1, caller: $2) },
        .manager(ManagerMethods.lock) { try await $0.lock($1, caller: $2) },
        .manager(ManagerMethods.unlock) { try await $0.unlock($1, caller: $2) },
        .manager(ManagerMethods.setPasscode) { try await $0.setPasscode($1, caller: $2) },
        .manager(ManagerMethods.wipe) { try await $0.wipe($1, caller: $2) },
        .manager(ManagerMethods.previewWipe) { try await $0.previewWipe($1, caller: $2) },
        .manager(ManagerMethods.register) { try await $0.register($1, caller: $2) },
        .manager(ManagerMethods.setCredentials) { try await $0.setCredentials($1, caller: $2) },
        .manager(ManagerMethods.unregister) { try await $0.unregister($1, caller: $2) },
        .manager(ManagerMethods.checkIn) { try await $0.checkIn($1, caller: $2) },
        .manager(ManagerMethods.offlineCodeChallenge) { try await $0.offlineCodeChallenge($1, caller: $2) },
        .manager(ManagerMethods.offlineCodeEnter) { try await $0.offlineCodeEnter($1, caller: $2) },
        .manager(ManagerMethods.provisionOfflineCodes) { try await $0.provisionOfflineCodes($1, caller: $2) },
        .manager(ManagerMethods.getRecoveryWraps) { try await $0.recoveryWraps($1, caller: $2) },
        .manager(ManagerMethods.recover) { try await $0.recover($1, caller: $2) },
        .manager(ManagerMethods.liftAtLogin) { try await $0.liftAtLogin($1, caller: $2) },
    ])

    /// Answers one call: a lookup of its method in `bindings`.
    func dispatch(_ method: String, _ data: Data, peer: Peer) async throws -> Data {
        guard let binding = Self.bindings.binding(for: method) else {
            if method.hasPrefix(InterfaceDescription.managerName + ".") || method.hasPrefix(InterfaceDescription.serviceName + ".") {
                throw VarlinkError.methodNotFound(method)
            }
            let interface = method.split(separator: ".").dropLast().joined(separator: ".")
            throw VarlinkError.interfaceNotFound(interface)
        }
        return try await binding.call(self, data, peer)
    }

    // MARK: Authorization

    /// Asks the who-may table (`WhoMay`) whether `caller` may `verb` the registration named
    /// `user` (or `all`), and returns what it may act on; a refusal is thrown in the
    /// caller's words. For an ordinary user the facts it needs are read first: the
    /// registration of `user` (or of `namedRegistration`), and the names of her own.
    func authorize(
        _ verb: WhoMay.Verb, _ caller: Caller, user: String?, all: Bool = false, namedRegistration: String? = nil
    ) async throws -> WhoMay.Targets {
        var request = WhoMay.Request(
            caller: WhoMay.Caller(uid: caller.credentials.uid, name: caller.userName, isAdmin: caller.isAdmin), user: user, all: all)
        if !caller.isAdmin, ![.register, .setCredentials, .unregister, .provisionOfflineCodes, .liftAtLogin, .recover].contains(verb) {
            let all = try await manager.context.store.registrations()
            if let name = namedRegistration ?? user, let r = all.first(where: { $0.user == name }) {
                request.named = WhoMay.Registration(user: r.user, uid: r.uid, protection: r.protection)
            }
            request.own = all.filter { Ownership.isOwn(registrationUID: $0.uid, callerUID: caller.credentials.uid) }.map(\.user)
        }
        switch WhoMay.decide(verb, request) {
        case .allowed(let targets): return targets
        case .refused(let refusal):
            switch refusal.kind {
            case .notPermitted: throw VarlinkError.notPermitted(refusal.message)
            case .invalidParameter(let parameter): throw VarlinkError.invalidParameter(parameter, reason: refusal.message)
            }
        }
    }

    /// The registrations `targets` names (one that does not exist is `noSuchRegistration`).
    func users(_ targets: WhoMay.Targets) async throws -> [String] {
        switch targets {
        case .user(let user):
            guard try await manager.context.store.registrations().contains(where: { $0.user == user }) else { throw ManagerError.noSuchRegistration(user) }
            return [user]
        case .all: return try await manager.context.store.registrations().map(\.user)
        case .users(let users): return users
        case .nothing: return []
        case .records: preconditionFailure("a rule for registrations allowed records")
        }
    }

    /// The one registration `targets` names.
    func user(_ targets: WhoMay.Targets) -> String {
        if case .user(let user) = targets { return user }
        preconditionFailure("a rule for one registration allowed \(targets)")
    }
}
