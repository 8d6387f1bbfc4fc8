import Testing

@testable import LockwipeDaemon

@Suite struct RegistrationFlowTests {
    struct Boom: Error {}

    @Test func aFailureUndoesEveryCompletedStepInReverse() async {
        var log: [String] = []
        var flow = RegistrationFlow()
        flow.add(
            "a", run: { log.append("run a") },
            undo: {
                log.append("undo a")
                return nil
            })
        flow.add(
            "b", run: { log.append("run b") },
            undo: {
                log.append("undo b")
                return nil
            })
        flow.add(
            "c", run: { throw Boom() },
            undo: {
                log.append("undo c")
                return nil
            })
        flow.add("d", run: { log.append("run d") })
        await #expect(throws: RegistrationFlow.Failure.self) { try await flow.execute() }
        #expect(log == ["run a", "run b", "undo b", "undo a"])
    }

    @Test func failedUndosAreReportedNotHidden() async {
        var flow = RegistrationFlow()
        flow.add("create", run: {}, undo: { "could not remove /x" })
        flow.add("persist", run: { throw Boom() })
        do { try await flow.execute() } catch {
            #expect(error.step == "persist")
            #expect(error.undoProblems == ["could not remove /x"])
        }
    }
}
