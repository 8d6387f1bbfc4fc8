import LockwipeProcesses
import LockwipeVaultIO

extension VaultProtecting {
    /// Locks the vault of `uid`, ending all of her processes when `terminator` is given:
    /// first, before the vault is opened at all (so that a vault that cannot be opened, or
    /// a filesystem of hers that stalls the opening, does not spare them), then again
    /// where the protection ends holders (what she started meanwhile). Returns the pids
    /// ended; throws the lock's error, or `ProcessesSurvived` when some could not be ended.
    func lock(_ vaults: [VaultDirectory], uid: UInt32, ending terminator: ProcessTerminator?) throws -> [Int32] {
        var ended = Set<Int32>()
        var survivors: [Int32] = []
        var calls = 0
        func end() -> [Int32] {
            guard var terminator else { return [] }
            // After the first, a quick pass: kill(-1) ends what she started meanwhile at
            // once, and what outlived the first bounded passes outlives these too. Each
            // full pass again (the fscrypt lock asks between key-removal tries) stretched a
            // lock with a survivor past its vault call's deadline, and the vault was marked
            // unresponsive when it was not (issue 40, finding 2).
            if calls > 0 {
                terminator.grace = 0
                terminator.limit = min(terminator.limit, 0.5)
            }
            calls += 1
            let outcome = terminator.terminate(uid: uid)
            ended.formUnion(outcome.ended)
            survivors = outcome.survivors
            return outcome.ended
        }
        _ = end()
        try lock(vaults, uid: uid, endHolders: end)
        guard survivors.isEmpty else { throw ProcessesSurvived(uid: uid, pids: survivors) }
        return ended.sorted()
    }
}
