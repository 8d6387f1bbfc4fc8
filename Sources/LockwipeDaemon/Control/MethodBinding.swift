import Foundation
import LockwipeCore
import LockwipeProtocol

/// A declared method bound to its handler: how it is decoded, whether it is answered during
/// the start-up pass, who the caller is, and the reply encoded.
struct MethodBinding: Sendable {
    /// What a method does while lockwiped is in its start-up pass (`ControlServer.startUpEnded()`).
    enum StartUpPass<Parameters>: Sendable {
        /// Answered: the service interface, and status.
        case answered
        /// `StartingUp` until the pass has ended (before the parameters are read).
        case refused
        /// Answered, but for the requests `refuse` picks (the login gate's `GetStatus`).
        case answeredUnless(@Sendable (Parameters) -> Bool)
    }

    let declaration: any VarlinkMethodDeclaration
    let call: @Sendable (ControlServer, Data, ControlServer.Peer) async throws -> Data

    /// A method of `io.lockwipe.Manager`: the caller is known (SO_PEERCRED, and whether she
    /// is an administrator) before the handler runs; a connection whose credentials cannot
    /// be read is refused.
    static func manager<P, R>(
        _ method: VarlinkMethod<P, R>, duringStartUp: StartUpPass<P> = .refused,
        encode: @escaping @Sendable (ControlServer, R) throws -> Data = { try VarlinkMessage.encodeReply($1) },
        _ handler: @escaping @Sendable (ControlServer, P, Caller) async throws -> R
    ) -> MethodBinding {
        MethodBinding(declaration: method) { server, data, peer in
            if server.isStartingUp, case .refused = duringStartUp { throw VarlinkError.startingUp(ControlServer.startingUpRefusal) }
            let parameters = try VarlinkMessage.decodeParameters(P.self, from: data)
            if server.isStartingUp, case .answeredUnless(let refuse) = duringStartUp, refuse(parameters) {
                throw VarlinkError.startingUp(ControlServer.startingUpRefusal)
            }
            let caller = try await peer.caller { await server.manager.caller($0) }
            return try encode(server, try await handler(server, parameters, caller))
        }
    }

    /// A method of `org.varlink.service`: answered to anyone, at any time.
    static func service<P, R>(_ method: VarlinkMethod<P, R>, _ handler: @escaping @Sendable (ControlServer, P) throws -> R) -> MethodBinding {
        MethodBinding(declaration: method) { server, data, _ in
            try VarlinkMessage.encodeReply(try handler(server, try VarlinkMessage.decodeParameters(P.self, from: data)))
        }
    }
}

/// The bindings by method name: a dispatch is one lookup.
struct MethodTable: Sendable {
    let bindings: [MethodBinding]
    private let byName: [String: MethodBinding]

    init(_ bindings: [MethodBinding]) {
        self.bindings = bindings
        self.byName = Dictionary(uniqueKeysWithValues: bindings.map { ($0.declaration.name, $0) })
    }

    func binding(for method: String) -> MethodBinding? { byName[method] }
}
