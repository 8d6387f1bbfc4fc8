/// The methods of `io.lockwipe.Manager` (see `InterfaceDescription`).
public enum ManagerMethod: String, Sendable, CaseIterable {
    case getStatus = "io.lockwipe.Manager.GetStatus"
    case getPolicy = "io.lockwipe.Manager.GetPolicy"
    case getHistory = "io.lockwipe.Manager.GetHistory"
    case getCertificate = "io.lockwipe.Manager.GetCertificate"
    case lock = "io.lockwipe.Manager.Lock"
    case unlock = "io.lockwipe.Manager.Unlock"
    case wipe = "io.lockwipe.Manager.Wipe"
    case previewWipe = "io.lockwipe.Manager.PreviewWipe"
    case register = "io.lockwipe.Manager.Register"
    case unregister = "io.lockwipe.Manager.Unregister"
    case checkIn = "io.lockwipe.Manager.CheckIn"
    case setCredentials = "io.lockwipe.Manager.SetCredentials"
    case setPasscode = "io.lockwipe.Manager.SetPasscode"
}
