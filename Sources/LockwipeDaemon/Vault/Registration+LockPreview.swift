import Foundation
import LockwipeBase
import LockwipeCore
import LockwipeProcesses
import LockwipeWipe
import Logging

/// The processes a lock ends: what a lock would end (`lockwipectl lock` lists it first), read
/// without the turn.
/// (The client of her own lock ended after its answer: `RegistrationContext+OwnRequest.swift`.)
extension Registration {
    /// What a lock would end now (`r`: its record as just read) (`lockwipectl lock` lists it first): her
    /// processes, but the client asking when it is hers (a lock spares it), and what will
    /// undo the lock for the one asking (`byAdmin`: an administrator; `UnlockRule.undo`).
    /// Changes nothing.
    nonisolated(nonsending) func lockPreview(_ r: RegistrationRecord, byAdmin: Bool) async throws -> Outcome {
        let undo = UnlockRule.undo(user: r.user, byAdmin: byAdmin, protection: r.protection, serverConfigured: context.configuration.server.isConfigured)
        guard context.configuration.terminateProcesses else {
            return Outcome(
                user: r.user, operation: .lock, state: r.state, reason: "ends no processes ([lock] terminate_processes = false)", processes: [],
                undo: undo)
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
        return Outcome(user: r.user, operation: .lock, state: r.state, reason: detail, processes: entries, undo: undo)
    }
}
