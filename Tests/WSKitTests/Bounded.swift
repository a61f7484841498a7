import Foundation
import TestSupport

/// Fails (throws) instead of hanging when `body` takes longer than `seconds`; the body's
/// task is cancelled then, and not waited for (a body stuck in a call that ignores
/// cancellation must fail the test, not hang it).
func withTimeout<T: Sendable>(_ seconds: Double = 20, _ what: String = "the test",
                              _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let outcome = FirstOutcome<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            outcome.set(continuation)
            let work = Task {
                do { outcome.resume(.success(try await body())) } catch { outcome.resume(.failure(error)) }
            }
            let timer = Task {
                try? await Task.sleep(for: .seconds(seconds))
                if Task.isCancelled { return }
                work.cancel()
                outcome.resume(.failure(HarnessError("\(what) timed out after \(seconds) s")))
            }
            outcome.onResume = { work.cancel(); timer.cancel() }
        }
    } onCancel: {
        outcome.resume(.failure(CancellationError()))
    }
}

/// The first of the body's result and the timer's failure resumes the caller.
final class FirstOutcome<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<T, any Error>?
    private var early: Result<T, any Error>?
    private var done = false
    var onResume: (@Sendable () -> Void)? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
    private var stored: (@Sendable () -> Void)?

    func set(_ continuation: CheckedContinuation<T, any Error>) {
        let ready = lock.withLock { () -> Result<T, any Error>? in
            if let early { return early }
            self.continuation = continuation
            return nil
        }
        if let ready { continuation.resume(with: ready) }
    }

    func resume(_ result: Result<T, any Error>) {
        let waiting = lock.withLock { () -> (CheckedContinuation<T, any Error>?, (@Sendable () -> Void)?)? in
            if done { return nil }
            done = true
            defer { continuation = nil }
            if continuation == nil { early = result }
            return (continuation, stored)
        }
        guard let waiting else { return }
        waiting.0?.resume(with: result)
        waiting.1?()
    }
}

/// A child process crossing to the thread that waits for it.
struct ChildBox: @unchecked Sendable {
    let child: ChildProcess
}

/// Waits for `child` on a thread of its own (not Swift's cooperative pool, which the
/// server's handlers need), at most `timeout` seconds.
func finished(_ child: ChildProcess, timeout: Double) async -> RunResult {
    let box = ChildBox(child: child)
    return await withCheckedContinuation { (continuation: CheckedContinuation<ResultBox, Never>) in
        Thread.detachNewThread { continuation.resume(returning: ResultBox(result: box.child.wait(timeout: timeout))) }
    }.result
}

struct ResultBox: @unchecked Sendable {
    let result: RunResult
}
