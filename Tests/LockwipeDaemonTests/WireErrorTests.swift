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

/// The other half of the wall: every `Outcome` becomes the `ActionResult` clients read, in
/// the JSON they read before the domain stopped building it.
struct WireOutcomeTests {
    static func json(_ outcome: Outcome) throws -> String {
        String(decoding: try VarlinkCoding.encoder().encode(ActionResult(outcome)), as: UTF8.self)
    }

    @Test func anOperationThatDidWhatWasAskedSaysNothingOfFailureOrLift() throws {
        let o = Outcome(user: "alice", operation: .checkIn, state: .active, reason: "contact ok")
        #expect(try Self.json(o) == #"{"action":"check-in","detail":"contact ok","state":"active","user":"alice"}"#)
    }

    @Test func failureLiftAndProcessesAreCarriedOnlyWhenSet() throws {
        let failed = ActionResult(Outcome(user: "alice", operation: .checkIn, state: nil, reason: "refused", failed: true))
        #expect(failed.failed == true && failed.lifted == nil && failed.state == nil)
        let lifted = ActionResult(Outcome(user: "alice", operation: .login, state: .locked, reason: "lock lifted", lift: .handedBack))
        #expect(lifted.lifted == true && lifted.action == "login")
        let preview = ActionResult(
            Outcome(user: "alice", operation: .lock, state: .active, reason: "ends 1 process", processes: [.init(pid: 7, comm: "sh", uid: 1000)]))
        #expect(preview.processes == [ProcessEntry(pid: 7, comm: "sh", uid: 1000)])
    }

    @Test(arguments: [
        (Outcome.Operation.checkIn, "check-in"), (.offlineCode, "offline-code"), (.passcodeSet, "passcode-set"),
        (.passcodeChanged, "passcode-changed"), (.lock, "lock"), (.unregister, "unregister"),
    ])
    func operationsKeepTheirWireNames(_ operation: Outcome.Operation, _ name: String) {
        #expect(ActionResult(Outcome(user: "a", operation: operation, state: nil, reason: "")).action == name)
    }
}
