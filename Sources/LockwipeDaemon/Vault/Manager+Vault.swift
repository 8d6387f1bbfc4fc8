import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeProcesses
import LockwipeVaultIO
import LockwipeWipe
import Logging

/// The vault requests that are more than one registration's turn: an unlock that may check
/// in first, a login's password for every registration of its account, what a lock would
/// end, and its client ended after the answer. Lock and passcode requests are the
/// registration's own (`Registration+Lock.swift`, `+Passcode`), reached by `perform(on:)`.
extension Manager {
    public func unlock(user: String, by caller: Caller, passcode: String? = nil, newPasscode: String? = nil) async throws -> Outcome {
        if try await checkInBeforeUserUnlock(user: user, caller: caller) {
            return Outcome(
                user: user, operation: .unlock, state: .active,
                reason: "unlocked: the policy server lifted the lock at the check-in just made")
        }
        let result = try await registration(named: user).withTurn { turn in
            try await turn.registration.unlock(in: turn, caller: caller, passcode: passcode, newPasscode: newPasscode)
        }
        await reschedule()
        return result
    }

    /// A user unlocking their own vault after a server or offline lock that is not liftable
    /// yet: one check-in attempt first (outside the registration's turn, as every check-in),
    /// so that a contact makes the lock liftable (her passcode then lifts it, `UnlockRule`),
    /// or, with `lift_after_contact = "immediately"`, lifts it or hands it back to the passcode.
    /// Returns true when that contact already opened the vault (its key is wrapped by the
    /// machine key): then there is nothing left for the unlock to do.
    func checkInBeforeUserUnlock(user: String, caller: Caller) async throws -> Bool {
        guard context.fetcher != nil, let r = try await context.store.registration(user), case .checkInFirst = UnlockRule.access(registration(of: r).unlockRequest(r, caller))
        else { return false }
        _ = await checkIn(user: user, purpose: .requested)
        return try await context.store.registration(user)?.state == .active
    }

    /// What a lock of `user` would end now (`lockwipectl lock` lists it first): her
    /// processes, but the client asking when it is hers (a lock spares it). Changes nothing.
    public func lockPreview(user: String) async throws -> Outcome {
        guard let r = try await context.store.registration(user) else { throw ManagerError.noSuchRegistration(user) }
        guard context.configuration.terminateProcesses else {
            return Outcome(
                user: user, operation: .lock, state: r.state, reason: "ends no processes ([lock] terminate_processes = false)", processes: [])
        }
        let client = RequestingClient.current
        let spared = client.flatMap { $0.uid == r.uid ? $0.pid : nil }
        let uid = r.uid
        let entries = try await BlockingPool.run {
            ProcessTerminator(grace: 0, sparing: spared).processes(of: uid).map { pid in
                // Her own choice of name (prctl): control characters shown as "?", never
                // passed on to an administrator's terminal.
                let raw = ProcFile.read("/proc/\(pid)/comm")?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
                let comm = String(String.UnicodeScalarView(raw.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : $0 }))
                return Outcome.Process(pid: pid, comm: comm, uid: uid)
            }
        }
        let detail = entries.isEmpty ? "ends no processes (none running)" : "ends \(entries.count) process\(entries.count == 1 ? "" : "es")"
        return Outcome(user: user, operation: .lock, state: r.state, reason: detail, processes: entries)
    }

    /// After a request that ended its own user's processes has been answered and its
    /// connection closed: the client (spared so that it could read the answer) has
    /// `clientExit` to exit, and is ended if it has not (a client of her own making gains
    /// no more than that moment). Her other processes are not touched again: she may go
    /// on using the machine, to unlock with her passcode for one.
    public func endClientAfterOwnRequest(user: String, _ client: RequestingClient, clientExit: TimeInterval = 1) async {
        guard context.configuration.terminateProcesses else { return }
        let terminator = ProcessTerminator(grace: TimeInterval(context.configuration.terminateGraceSeconds))
        let (uid, pid) = (client.uid, client.pid)
        let outcome: ProcessTerminator.Outcome
        do {
            outcome = try await BlockingPool.run {
                let deadline = Date().addingTimeInterval(clientExit)
                while ProcessTerminator.isRunning(pid), Date() < deadline { usleep(20_000) }
                return terminator.terminate(uid: uid, only: pid)
            }
        } catch {
            context.logger.error("cannot end the client of \(user)'s own request: \(error)", metadata: ["user": .string(user)])
            return
        }
        if !outcome.ended.isEmpty {
            context.logger.notice(
                "ended the client (pid \(pid)) still running after the lock of \(user) it asked for",
                metadata: ["user": .string(user), "terminated_pids": .string(outcome.ended.map(String.init).joined(separator: " "))])
        }
        if !outcome.survivors.isEmpty {
            context.logger.error(
                "after the lock of \(user) its client asked for: \(ProcessesSurvived(uid: uid, pids: outcome.survivors))",
                metadata: ["user": .string(user)])
        }
    }

    /// Every registration of `uid`, each in its turn. A registration whose turn fails says
    /// so in its result; the login itself never waits for more than these turns.
    public func liftAtLogin(uid: UInt32, password: String, by caller: Caller) async throws -> [Outcome] {
        var results: [Outcome] = []
        for r in try await context.store.registrations() where r.uid == uid {
            do {
                results.append(try await registration(named: r.user).withTurn { turn in try await turn.registration.liftAtLogin(in: turn, password: password) })
            } catch let error as ManagerError {
                results.append(Outcome(user: r.user, operation: .login, state: r.state, reason: error.message, failed: true))
            }
        }
        await reschedule()
        return results
    }

}
