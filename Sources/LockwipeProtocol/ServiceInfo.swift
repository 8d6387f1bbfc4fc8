/// `org.varlink.service.GetInfo` reply.
public struct ServiceInfo: Codable, Sendable, Equatable {
    public var vendor: String
    public var product: String
    public var version: String
    public var url: String
    public var interfaces: [String]

    public init(vendor: String, product: String, version: String, url: String, interfaces: [String]) {
        self.vendor = vendor
        self.product = product
        self.version = version
        self.url = url
        self.interfaces = interfaces
    }
}

public struct InterfaceDescriptionRequest: Codable, Sendable, Equatable {
    public var interface: String
    public init(interface: String) { self.interface = interface }
}

public struct InterfaceDescriptionReply: Codable, Sendable, Equatable {
    public var description: String
    public init(description: String) { self.description = description }
}
