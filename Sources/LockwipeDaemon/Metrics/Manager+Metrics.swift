import LockwipeCore

/// The metrics file's reading: what `status` reports, from the same clock arithmetic and
/// policy evaluation (`outlook`), as numbers.
extension Manager {
    func metricsSnapshot() async throws -> MetricsSnapshot {
        let reading = context.clock.now()
        if context.store.damage != nil {
            return MetricsSnapshot(
                version: LockwipeVersion.current, writtenAt: reading.wall, degraded: true, wipesComplete: 0, wipesIncomplete: 0, registrations: [])
        }
        let list = try await context.store.registrations()
        let wipes = try await context.store.wipeCounts()
        return MetricsSnapshot(
            version: LockwipeVersion.current, writtenAt: reading.wall, degraded: false, wipesComplete: wipes.complete, wipesIncomplete: wipes.incomplete,
            registrations: list.map { r in
                let o = context.outlook(r, reading)
                var m = MetricsSnapshot.Registration(
                    user: r.user, uid: r.uid, id: r.id.rawValue, state: r.state, protection: r.protection, blocked: r.blocked, offlineSeconds: o.offline,
                    lastContact: r.clock.lastContact, next: o.next, failedCheckIns: r.server.failures, rejectedStatus: r.server.rejectedStatus)
                if let stored = r.lease, stored.remaining(r.clock, offline: o.offline) > 0 {
                    m.leaseEnd = stored.until
                    m.leaseSource = stored.source.rawValue
                }
                return m
            })
    }

    /// Writes the metrics file now and then at least every check-in interval (`[server]
    /// interval`, also without a server): offline time grows without any state change,
    /// and the file's timestamp proves the daemon is alive. Runs until cancelled.
    public nonisolated func refreshMetricsPeriodically() async {
        while !Task.isCancelled {
            metrics.changed()
            let seconds = await context.configuration.server.intervalSeconds
            try? await Task.sleep(for: .seconds(seconds))
        }
    }
}
