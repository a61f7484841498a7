import Foundation
import TestSupport

/// Fails (throws) instead of hanging when `body` takes longer than `seconds`; the body's
/// task is cancelled then.
func withTimeout<T: Sendable>(_ seconds: Double = 20, _ what: String = "the test",
                              _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask { try await Task.sleep(for: .seconds(seconds)); return nil }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw HarnessError("\(what) timed out after \(seconds) s") }
        return value
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
