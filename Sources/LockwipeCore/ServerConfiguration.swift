/// The policy server to check in with (`[server]`).
public struct ServerConfiguration: Sendable, Equatable {
    /// Base URL: https://..., or http:// to a loopback host only (`ServerURL.problem`).
    public var url: String?
    /// Seconds between check-ins of one registration after a success.
    public var intervalSeconds = 900
    /// Seconds one check-in may take, connection and TLS handshake included.
    public var timeoutSeconds = 10
    /// PEM file of CA certificates trusted in addition to the system trust store.
    public var caFile: String?
    /// Plain http:// (to a loopback host) is accepted only when this is set: any local user
    /// who binds that port first receives every registration's token and can order wipes.
    public var allowInsecureHTTP = false
    /// `[server.oauth]`: access tokens from a registration's refresh token (nil: none).
    public var oauth: OAuthConfiguration?
    /// The wire protocol (`protocol`): lockwipe's own or SAP Mobile Services'.
    public var serverProtocol: ServerProtocol = .lockwipe
    /// SAP Mobile Services: the application id (`X-SMP-APPID`); required with that protocol.
    public var applicationID: String?
    /// SAP Mobile Services: this machine's device id (`X-SMP-DEVICEID`). With that protocol
    /// the loader fills it in when the file does not set it (`DeviceID.fromMachineID`).
    public var deviceID: String?
    /// SAP Mobile Services: the application version sent as `X-APP-VERSION` on every
    /// request (`application_version`); nil: none is sent.
    public var applicationVersion: String?

    /// The SAP identity (nil with the lockwipe protocol).
    public var sapIdentity: SAPIdentity? {
        guard serverProtocol == .sapMobileServices, let applicationID, let deviceID else { return nil }
        return SAPIdentity(applicationID: applicationID, deviceID: deviceID, applicationVersion: applicationVersion)
    }

    public var isConfigured: Bool { url != nil }
    /// The server is reached over plain http:// (allowed by `allowInsecureHTTP`).
    public var usesInsecureHTTP: Bool { url.map(ServerURL.isPlainHTTP) ?? false }

    public init(
        url: String? = nil, intervalSeconds: Int = 900, timeoutSeconds: Int = 10, caFile: String? = nil,
        allowInsecureHTTP: Bool = false, serverProtocol: ServerProtocol = .lockwipe, applicationID: String? = nil, deviceID: String? = nil
    ) {
        self.url = url
        self.intervalSeconds = intervalSeconds
        self.timeoutSeconds = timeoutSeconds
        self.caFile = caFile
        self.allowInsecureHTTP = allowInsecureHTTP
        self.serverProtocol = serverProtocol
        self.applicationID = applicationID
        self.deviceID = deviceID
    }
}
