import Foundation
import LockwipeBase
import LockwipeCheckIn
import LockwipeCore
import LockwipeSystemd
import LockwipeVaultIO
import LockwipeWipe
import Logging
import NIOCore

/// What a wipe would do, read without a turn (`lockwipectl wipe --dry-run`), and the
/// certificates of wipes done. The wipe itself is the registration's (`Registration+Wipe.swift`),
/// reached by `perform(on:)`.
extension Manager {
    /// What a wipe of `user` would do now: per vault the method, the census, the media
    /// and the caveats, read without changing anything (`lockwipectl wipe --dry-run`).
    func previewWipe(user: String) async throws -> WipePlan {
        guard let r = try await context.store.registration(user) else { throw ManagerError.noSuchRegistration(user) }
        var options = context.configuration.wipe
        // An encrypted vault whose key is still stored would be crypto-erased (no overwrite).
        let stored: VaultKeyStatus?
        do {
            stored = r.protection == .encrypted ? try await context.store.vaultKeyStatus(user) : nil
        } catch {
            throw context.stateFailure(user, "wipe --dry-run", error)
        }
        let crypto = stored != nil
        if crypto { options.passes = 0 }
        let (vaults, passes) = (r.vaults, options.passes)
        // A user's own read, possibly long: on the readers' pool, never in enforcement's way.
        let surveys = try await BlockingPool.runRead {
            vaults.map { VaultSurvey.take($0, count: true, overwrite: passes > 0, maxOpenDirectories: SecureEraser().maxOpenDirectories) }
        }
        let method: WipePlan.Method = crypto ? .cryptoErase : passes > 0 ? .overwrite : .unlink
        return WipePlan(user: user, method: method, passes: passes, pattern: options.pattern.rawValue, surveys: surveys)
    }

    /// The newest certificate of `user` (or the one with `id`); with an `owner`, only one
    /// made for that uid's registration (as `history`), so a new account with an old name
    /// finds none. Who may ask is decided before (`WhoMay`, `.readCertificate`).
    public func certificate(user: String, id: String?, owner: UInt32?) async throws -> SanitizationCertificate {
        guard let certificate = try await context.store.certificate(user: user, id: id, owner: owner) else {
            throw ManagerError.noSuchCertificate(user: user, id: id)
        }
        return certificate
    }
}
