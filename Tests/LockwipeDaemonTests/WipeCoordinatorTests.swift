import LockwipeCore
import LockwipeVaultIO
import Synchronization
import Testing

@testable import LockwipeDaemon
@testable import LockwipeWipe

@Suite struct WipeCoordinatorTests {
    /// An erase that removes one entry, then waits until it is released or cancelled (as
    /// the real one stops at its next entry); it reports `skipped` when cancelled.
    final class HeldEraser: VaultErasing {
        let released = Flag()
        let started = Mutex(0)
        func erase(directories: [VaultDirectory], options: WipeOptions, progress: WipeProgress) async -> WipeSummary {
            started.withLock { $0 += 1 }
            progress.entryRemoved()
            while !released.isSet && !progress.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
            let skipped = progress.isCancelled ? [WipeSummary.Skipped(path: "/v", reason: "stopped")] : []
            return WipeSummary(filesOverwritten: 0, bytesOverwritten: 0, entriesRemoved: 1, skipped: skipped, elapsedSeconds: 0)
        }
    }

    final class Flag: Sendable {
        private let value = Atomic(false)
        var isSet: Bool { value.load(ordering: .relaxed) }
        func set() { value.store(true, ordering: .relaxed) }
    }

    func waitUntil(_ condition: () -> Bool) async {
        for _ in 0..<2000 where !condition() { try? await Task.sleep(for: .milliseconds(5)) }
    }

    @Test func theCallersProgressCountsWhileItRunsAndTheTickerStopsWhenItEnds() async throws {
        let eraser = HeldEraser()
        let wipes = WipeCoordinator(eraser: eraser)
        let tickerStopped = Flag()
        let progress = WipeProgress()
        let run = Task {
            await wipes.erase(registration: RegistrationID("alice"), directories: [], options: WipeOptions(), progress: progress) { _ in
                { tickerStopped.set() }
            }
        }
        await waitUntil { progress.info().entriesRemoved == 1 }
        #expect(progress.info().entriesRemoved == 1)
        #expect(!tickerStopped.isSet)
        eraser.released.set()
        let summary = try #require(await run.value)
        #expect(summary.complete)
        #expect(tickerStopped.isSet)
    }

    @Test func aSecondEraseOfTheSameUserIsNotStartedButOneAfterItEnds() async throws {
        let eraser = HeldEraser()
        let wipes = WipeCoordinator(eraser: eraser)
        let progress = WipeProgress()
        let first = Task { await wipes.erase(registration: RegistrationID("alice"), directories: [], options: WipeOptions(), progress: progress) }
        await waitUntil { progress.info().entriesRemoved == 1 }
        #expect(await wipes.erase(registration: RegistrationID("alice"), directories: [], options: WipeOptions(), progress: WipeProgress()) == nil)
        #expect(eraser.started.withLock { $0 } == 1)
        eraser.released.set()
        #expect(try #require(await first.value).complete)
        #expect(try #require(await wipes.erase(registration: RegistrationID("alice"), directories: [], options: WipeOptions(), progress: WipeProgress())).complete)
        #expect(eraser.started.withLock { $0 } == 2)
    }

    @Test func cancelAllStopsTheRunningWipesAndEveryLaterOne() async throws {
        let wipes = WipeCoordinator(eraser: HeldEraser())
        let progress = WipeProgress()
        let running = Task { await wipes.erase(registration: RegistrationID("alice"), directories: [], options: WipeOptions(), progress: progress) }
        await waitUntil { progress.info().entriesRemoved == 1 }
        wipes.cancelAll()
        #expect(try #require(await running.value).complete == false)
        // Begun after the shutdown: stopped before its first entry is waited on.
        #expect(try #require(await wipes.erase(registration: RegistrationID("bob"), directories: [], options: WipeOptions(), progress: WipeProgress())).complete == false)
    }

    @Test func cancellingTheCallingTaskStopsTheErase() async throws {
        let wipes = WipeCoordinator(eraser: HeldEraser())
        let progress = WipeProgress()
        let running = Task { await wipes.erase(registration: RegistrationID("alice"), directories: [], options: WipeOptions(), progress: progress) }
        await waitUntil { progress.info().entriesRemoved == 1 }
        running.cancel()
        #expect(try #require(await running.value).complete == false)
    }
}
