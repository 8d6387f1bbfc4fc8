import LockwipeMetrics

extension Configuration {
    /// What `--check-config` says about the metrics file (`MetricsTextfile.checkLine`).
    public var metricsSummary: String { MetricsTextfile.checkLine(path: metricsTextfile, options: metrics) }
}
