// Waiting in tests for values that stop moving.

/// Returns `value()` once it has stayed the same for `quiet` seconds (or when `within`
/// seconds have passed): a stall, such as sends that a peer which does not read holds up.
package func settledValue<T: Equatable>(quiet: Double = 0.5, within: Double = 15, _ value: () -> T) async throws -> T {
    var last = value(), stableSince = monotonicSeconds()
    let end = monotonicSeconds() + within
    while monotonicSeconds() < end {
        try await Task.sleep(for: .milliseconds(20))
        let now = value()
        if now != last { last = now; stableSince = monotonicSeconds() }
        if monotonicSeconds() - stableSince > quiet { break }
    }
    return last
}
