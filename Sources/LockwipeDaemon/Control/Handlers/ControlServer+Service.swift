import LockwipeCore
import LockwipeProtocol

/// `org.varlink.service`: what every varlink service answers, to anyone.
extension ControlServer {
    func getInfo() -> ServiceInfo {
        ServiceInfo(
            vendor: "lockwipe", product: "lockwiped", version: LockwipeVersion.current, url: "https://lockwipe.invalid/",
            interfaces: [InterfaceDescription.serviceName, InterfaceDescription.managerName])
    }

    func getInterfaceDescription(_ p: InterfaceDescriptionRequest) throws -> InterfaceDescriptionReply {
        switch p.interface {
        case InterfaceDescription.managerName: return InterfaceDescriptionReply(description: InterfaceDescription.manager)
        case InterfaceDescription.serviceName: return InterfaceDescriptionReply(description: InterfaceDescription.service)
        default: throw VarlinkError.interfaceNotFound(p.interface)
        }
    }
}
