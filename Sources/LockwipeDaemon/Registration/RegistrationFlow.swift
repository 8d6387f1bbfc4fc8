import Foundation
import LockwipeBase

/// Registration as a flow of steps that is all or nothing: the steps run in order, the
/// first failure stops the flow, and every step that had completed is undone in reverse
/// order. No half-registered user, no directory left behind.
struct RegistrationFlow {
    struct Step {
        var name: String
        /// Blocking work inside a step runs on `BlockingPool`: the flow runs on the actor.
        var run: () async throws -> Void
        /// Undoes a completed `run`. Must not throw: a failed undo is reported, not hidden.
        var undo: () -> String?
    }

    private(set) var steps: [Step] = []

    mutating func add(_ name: String, run: @escaping () async throws -> Void, undo: @escaping () -> String? = { nil }) {
        steps.append(Step(name: name, run: run, undo: undo))
    }

    struct Failure: Error, CustomStringConvertible {
        var step: String
        var error: any Error
        var undoProblems: [String]
        var description: String {
            var text = "\(step): \(ErrorWords.of(error))"
            if !undoProblems.isEmpty { text += " (and undoing failed: \(undoProblems.joined(separator: "; ")))" }
            return text
        }
    }

    /// Runs on the caller's actor (the steps are isolated to it).
    func execute(isolation: isolated (any Actor)? = #isolation) async throws(Failure) {
        var done: [Step] = []
        for step in steps {
            do {
                try await step.run()
                done.append(step)
            } catch {
                let problems = done.reversed().compactMap { $0.undo() }
                throw Failure(step: step.name, error: error, undoProblems: problems)
            }
        }
    }
}
