import Foundation
import LockwipeCore
import LockwipeProtocol
import LockwipeSystemd
import LockwipeTestSupport
import Logging
import Testing

@testable import LockwipeDaemon

/// The control server's dispatch is a lookup in one table of bindings, one per declared
/// method; what a method does during the start-up pass is a property of its binding.
@Suite struct ControlDispatchTests {
    @Test func everyDeclaredMethodIsBoundOnceAndNothingElse() {
        let declared = (ManagerMethods.all + ServiceMethods.all).map(\.name)
        let bound = ControlServer.bindings.bindings.map(\.declaration.name)
        #expect(bound.sorted() == declared.sorted())
        for name in declared { #expect(ControlServer.bindings.binding(for: name) != nil, "\(name)") }
    }

    /// The reply to one call made as root, decoded as `R` or thrown as the varlink error.
    static func call<P, R>(_ server: ControlServer, _ method: VarlinkMethod<P, R>, _ parameters: P) async throws -> R {
        let peer = ControlServer.Peer(PeerCredentials(pid: getpid(), uid: 0, gid: 0))
        let reply = try #require(await server.respond(to: try VarlinkMessage.encodeCall(method: method.name, parameters: parameters), peer: peer))
        return try VarlinkMessage.decodeReply(R.self, from: reply.data)
    }

    @Test func duringTheStartUpPassOnlyStatusAndTheServiceInterfaceAreAnswered() async throws {
        try await ManagerFixture.run { f in
            let server = ControlServer(
                manager: f.manager, logger: Logger(label: "test"), limits: .init(maxConnections: 4, maxMessageBytes: 1 << 20, idleTimeout: .seconds(5)))
            let startingUp = VarlinkError.startingUp(ControlServer.startingUpRefusal)
            let info = try await Self.call(server, ServiceMethods.getInfo, NoParameters())
            #expect(info.product == "lockwiped")
            let description = try await Self.call(
                server, ServiceMethods.getInterfaceDescription, InterfaceDescriptionRequest(interface: InterfaceDescription.managerName))
            #expect(description.description == InterfaceDescription.manager)
            let status = try await Self.call(server, ManagerMethods.getStatus, StatusRequest())
            #expect(status.startingUp == true)
            await #expect(throws: startingUp) { try await Self.call(server, ManagerMethods.getStatus, StatusRequest(loginGate: true)) }
            await #expect(throws: startingUp) { try await Self.call(server, ManagerMethods.lock, TargetSelection(user: "nobody")) }
            await #expect(throws: startingUp) { try await Self.call(server, ManagerMethods.getPolicy, NoParameters()) }

            server.startUpEnded()
            let gate = try await Self.call(server, ManagerMethods.getStatus, StatusRequest(loginGate: true))
            #expect(gate.startingUp == nil)
            await #expect(throws: VarlinkError.noSuchRegistration("nobody")) { try await Self.call(server, ManagerMethods.lock, TargetSelection(user: "nobody")) }
            await #expect(throws: VarlinkError.invalidParameter("user", reason: "give exactly one of user or all")) {
                try await Self.call(server, ManagerMethods.wipe, TargetSelection())
            }
        }
    }

    @Test func anUnknownMethodIsNotFoundInItsInterface() async throws {
        try await ManagerFixture.run { f in
            let server = ControlServer(
                manager: f.manager, logger: Logger(label: "test"), limits: .init(maxConnections: 4, maxMessageBytes: 1 << 20, idleTimeout: .seconds(5)))
            let peer = ControlServer.Peer(PeerCredentials(pid: getpid(), uid: 0, gid: 0))
            for (method, error) in [
                ("io.lockwipe.Manager.Nothing", VarlinkError.methodNotFound("io.lockwipe.Manager.Nothing")),
                ("org.example.Other.Call", VarlinkError.interfaceNotFound("org.example.Other")),
            ] {
                let reply = try #require(await server.respond(to: try VarlinkMessage.encodeCall(method: method, parameters: NoParameters()), peer: peer))
                #expect(throws: error) { try VarlinkMessage.decodeReply(NoParameters.self, from: reply.data) }
            }
        }
    }
}
