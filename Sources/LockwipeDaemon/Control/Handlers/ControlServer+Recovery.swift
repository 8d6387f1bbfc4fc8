import Foundation
import LockwipeCore
import LockwipeProtocol

/// `GetRecoveryWraps`, `Recover` (docs/key-material.md, "Recovery"): administrators only.
extension ControlServer {
    func recoveryWraps(_ p: RecoveryWrapsRequest, caller: Caller) async throws -> RecoveryWrapsReply {
        _ = try await authorize(.recover, caller, user: p.user)
        let (wraps, missing) = try await manager.recoveryWraps(user: p.user)
        return RecoveryWrapsReply(
            wraps: wraps.map {
                RecoveryWrapInfo(
                    user: $0.user, registrationId: $0.id.rawValue, recoveryKey: $0.wrap.recipient, encapsulated: $0.wrap.encapsulated.base64EncodedString(),
                    sealed: $0.wrap.sealed.base64EncodedString())
            },
            missing: missing.map { RecoveryMissing(user: $0.user, reason: $0.reason) })
    }

    func recover(_ p: RecoverRequest, caller: Caller) async throws -> ActionReply {
        _ = try await authorize(.recover, caller, user: p.user)
        guard !p.registrationId.isEmpty, p.registrationId.utf8.count <= 64, p.registrationId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
            throw VarlinkError.invalidParameter("registration_id", reason: "'\(p.registrationId.prefix(80))' is not a registration id")
        }
        let id = RegistrationID(p.registrationId)
        guard var key = Data(base64Encoded: p.key).map(Array.init) else {
            throw VarlinkError.invalidParameter("key", reason: "the vault key must be base64")
        }
        defer { key.wipe() }
        return ActionReply([try await manager.recover(user: p.user, id: id, key: key, newPasscode: p.newPasscode, by: caller)])
    }
}
