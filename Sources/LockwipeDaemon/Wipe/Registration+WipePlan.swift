import LockwipeBase
import LockwipeCore
import LockwipeWipe

/// What a wipe would do, read without the turn (`lockwipectl wipe --dry-run`). The wipe
/// itself is `Registration+Wipe.swift`.
extension Registration {
    /// What a wipe would do now (`r`: its record as just read): per vault the method, the census, the media
    /// and the caveats, read without changing anything (`lockwipectl wipe --dry-run`).
    nonisolated(nonsending) func wipePlan(_ r: RegistrationRecord) async throws -> WipePlan {
        let user = r.user
        var options = context.configuration.wipe
        // An encrypted vault whose key is still stored would be crypto-erased (no overwrite).
        let stored: VaultKeyStatus?
        do {
            stored = r.protection == .encrypted ? try await context.store.vaultKeyStatus(registration: id) : nil
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
}
