import LockwipeProtocol
import Testing

@testable import LockwipeDaemon

/// The wall between domain and wire: every domain error becomes exactly one varlink error
/// that the interface description declares, with the sentence an operator reads intact.
struct WireErrorTests {
    static let cases: [(ManagerError, String)] = [
        (.notPermitted("only root"), VarlinkError.notPermittedName),
        (.noSuchRegistration("alice"), VarlinkError.noSuchRegistrationName),
        (.noSuchCertificate(user: "alice", id: nil), VarlinkError.noSuchCertificateName),
        (.noSuchCertificate(user: "alice", id: "0f"), VarlinkError.noSuchCertificateName),
        (.registrationRefused("no Unix user named 'x'"), VarlinkError.registrationRefusedName),
        (.invalidParameter("credentials", reason: "token: empty"), VarlinkError.invalidParameterName),
        (.actionFailed("lock of alice failed"), VarlinkError.actionFailedName),
        // The wire keeps its one name for a wrong state, and the sentence clients print.
        (.wrongState(user: "alice", current: .wiped, reason: "alice cannot be locked: the registration is wiped"), VarlinkError.actionFailedName),
        (.passcodeRequired(user: "alice", reason: "give it"), VarlinkError.passcodeRequiredName),
        (.passcodeExpired(user: "alice", reason: "passcode expired: change it"), VarlinkError.passcodeExpiredName),
    ]

    @Test(arguments: cases)
    func eachDomainErrorHasOneDeclaredWireError(_ error: ManagerError, _ name: String) {
        let wire = ControlServer.wireError(error)
        #expect(wire.name == name)
        #expect(wire.message == error.message)
        let declared =
            name.hasPrefix(InterfaceDescription.managerName + ".")
            ? InterfaceDescription.manager : InterfaceDescription.service
        let short = name.split(separator: ".").last.map(String.init) ?? name
        #expect(declared.contains("error \(short) ("), "\(name) is not declared in the interface description")
    }

    @Test func thePasscodeErrorsNameTheUser() {
        #expect(ControlServer.wireError(.passcodeRequired(user: "alice", reason: "r")).parameters["user"] == "alice")
        #expect(ControlServer.wireError(.passcodeExpired(user: "bob", reason: "r")).parameters["user"] == "bob")
    }
}
