/// One varlink method, declared once: its interface, its name, its text in the interface
/// description, and the types of its parameters and reply. The daemon binds a handler to
/// it (`ControlServer.bindings`), `lockwipectl` calls through it (`VarlinkClient.call`),
/// and `InterfaceDescription` is assembled from these declarations, so a method's name or
/// types cannot differ between the CLI, the daemon and the description (as systemd's
/// `SD_VARLINK_DEFINE_METHOD`).
public struct VarlinkMethod<Parameters: Codable & Sendable, Reply: Codable & Sendable>: VarlinkMethodDeclaration {
    /// The interface it belongs to (`io.lockwipe.Manager`).
    public let interface: String
    /// Its name within the interface (`Lock`).
    public let member: String
    /// Its text in the interface description: its comment, any type only it uses, and its
    /// `method` line, without a trailing newline.
    public let definition: String

    public init(_ interface: String, _ member: String, _ definition: String) {
        self.interface = interface
        self.member = member
        self.definition = definition
    }

    /// The fully qualified name a call carries (`io.lockwipe.Manager.Lock`).
    public var name: String { interface + "." + member }
}

/// What every method declaration tells whatever does not need its types: a list of them
/// assembles the interface description; the daemon checks that each is bound.
public protocol VarlinkMethodDeclaration: Sendable {
    var interface: String { get }
    var member: String { get }
    var definition: String { get }
    var name: String { get }
}
