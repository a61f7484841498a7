// Waiting in tests for a count that stops moving.

/// Returns `count()` once it has stayed the same for `quiet` seconds (or when `within`
/// seconds have passed): a stall, such as sends that a peer which does not read holds up.
package func stalledCount(quiet: Double = 0.5, within: Double = 15, _ count: () -> Int) async throws -> Int {
    var last = -1, stableSince = monotonicSeconds()
    let end = monotonicSeconds() + within
    while monotonicSeconds() < end {
        let now = count()
        if now != last { last = now; stableSince = monotonicSeconds() }
        if monotonicSeconds() - stableSince > quiet { break }
        try await Task.sleep(for: .milliseconds(20))
    }
    return count()
}
