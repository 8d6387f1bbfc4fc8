import Testing

@testable import LockwipeDaemon

/// What waits for the start-up pass (reloads, timers, the watchdog; the socket's shutdown)
/// starts once the gate opens, and a waiter cancelled first (a shutdown during the pass)
/// stops waiting without it.
@Suite struct StartUpGateTests {
    @Test func waitersGoOnOnceTheGateOpens() async {
        let gate = StartUpGate()
        let early = Task { await gate.opened() }
        try? await Task.sleep(for: .milliseconds(50))
        gate.open()
        #expect(await early.value)
        // A waiter that comes after the opening does not wait.
        #expect(await gate.opened())
    }

    @Test func aCancelledWaiterStopsWaitingWithoutTheGate() async {
        let gate = StartUpGate()
        let waiter = Task { await gate.opened() }
        try? await Task.sleep(for: .milliseconds(50))
        waiter.cancel()
        #expect(await waiter.value == false)
        let cancelledFirst = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await gate.opened()
        }
        #expect(await cancelledFirst.value == false)
    }
}
