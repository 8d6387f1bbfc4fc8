/// A stored SAP application connection the server may have forgotten (an administrator
/// deleted it in the cockpit): the pure decisions of the staleness probe. The Kapsel logon
/// plugin's way: ask the server for `Connections('{id}')`, and register again only when it
/// answers that the connection is gone.
public enum StaleConnection {
    /// What `GET .../Connections('{id}')` said.
    public enum Probe: Sendable, Equatable {
        /// 2xx: the server still knows the connection; the settings answer stands as it is.
        case present
        /// 404: the connection is gone; a new one is registered.
        case gone
        /// Anything else (other statuses, no answer): not known; the answer stands.
        case unknown(String)
    }

    /// Whether a settings answer for a registration with a stored connection id may mean
    /// that the id is stale: a 404, or a 403 that is not one of the known orders (lock,
    /// wipe, block). Everything else is the server's word as it is.
    public static func suspect(status: Int?, outcome: CheckInOutcome) -> Bool {
        switch status {
        case 404?: return true
        case 403?:
            switch outcome {
            case .lock, .wipe, .blocked: return false
            default: return true
            }
        default: return false
        }
    }

    /// The probe's answer.
    public static func probe(status: Int) -> Probe {
        if (200..<300).contains(status) { return .present }
        if status == 404 { return .gone }
        return .unknown("HTTP \(status)")
    }
}
