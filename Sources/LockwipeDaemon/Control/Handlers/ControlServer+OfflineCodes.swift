import LockwipeCore
import LockwipeProtocol

/// `OfflineCodeChallenge`, `OfflineCodeEnter`, `ProvisionOfflineCodes` (docs/offline-codes.md).
extension ControlServer {
    func offlineCodeChallenge(_ p: OfflineCodeChallengeRequest, caller: Caller) async throws -> OfflineCodeChallengeReply {
        let user = user(try await authorize(.offlineCode, caller, user: p.user))
        return try await manager.offlineCodeChallenge(user: user, extendDays: p.extendDays, by: caller)
    }

    func offlineCodeEnter(_ p: OfflineCodeEnterRequest, caller: Caller) async throws -> ActionReply {
        let user = user(try await authorize(.offlineCode, caller, user: p.user))
        return ActionReply([try await manager.offlineCodeEnter(user: user, code: p.code, by: caller)])
    }

    func provisionOfflineCodes(_ p: ProvisionOfflineCodesRequest, caller: Caller) async throws -> ProvisionOfflineCodesReply {
        _ = try await authorize(.provisionOfflineCodes, caller, user: nil)
        return try await manager.provisionOfflineCodes(machine: p.machine, machineKey: p.machineKey, by: caller)
    }
}
