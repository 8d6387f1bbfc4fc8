import LockwipeCore
import LockwipeProtocol

/// `OfflineCodeChallenge`, `OfflineCodeEnter`, `ProvisionOfflineCodes` (docs/offline-codes.md).
extension ControlServer {
    func offlineCodeChallenge(_ p: OfflineCodeChallengeRequest, caller: Caller) async throws -> OfflineCodeChallengeReply {
        let user = user(try await authorize(.offlineCode, caller, user: p.user))
        let extendDays = p.extendDays
        let issued = try await manager.perform(on: user) { turn in try await turn.registration.offlineCodeChallenge(in: turn, extendDays: extendDays, by: caller) }
        return OfflineCodeChallengeReply(user: issued.user, challenge: issued.text, machine: issued.machine, request: issued.request)
    }

    func offlineCodeEnter(_ p: OfflineCodeEnterRequest, caller: Caller) async throws -> ActionReply {
        let user = user(try await authorize(.offlineCode, caller, user: p.user))
        let code = p.code
        return ActionReply([try await manager.perform(on: user) { turn in try await turn.registration.offlineCodeEnter(in: turn, code: code, by: caller) }])
    }

    func provisionOfflineCodes(_ p: ProvisionOfflineCodesRequest, caller: Caller) async throws -> ProvisionOfflineCodesReply {
        _ = try await authorize(.provisionOfflineCodes, caller, user: nil)
        let (machine, detail) = try await manager.context.provisionOfflineCodes(machine: p.machine, machineKey: p.machineKey, by: caller)
        return ProvisionOfflineCodesReply(machine: machine, detail: detail)
    }
}
