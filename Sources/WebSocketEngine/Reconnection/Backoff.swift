/// Random numbers in [0, 1) for the backoff's jitter; tests pass a fixed sequence.
public protocol JitterSource {
    mutating func nextUnit() -> Double
}

/// The system's random generator.
public struct SystemJitter: JitterSource {
    private var generator = SystemRandomNumberGenerator()
    public init() {}
    public mutating func nextUnit() -> Double { Double.random(in: 0..<1, using: &generator) }
}

/// When to try again: exponential backoff with full jitter.
///
/// Retry n (from 0) waits a uniform time in [0, min(maxDelay, baseDelay × 2^n)], at least
/// `minimumDelay`, so no failure ever makes a busy loop. A connection that stayed up
/// `resetAfter` seconds starts the count afresh and its first retry goes at once; one that
/// dropped sooner does not (a flapping server gets growing delays, not a fast loop). A
/// server's `Retry-After` is honoured above `maxDelay`, up to `retryAfterLimit`.
public struct Backoff: Equatable, Sendable {
    /// Seconds; the first retry's upper bound.
    public var baseDelay: Double = 0.5
    /// Seconds; no jittered wait is longer.
    public var maxDelay: Double = 30
    /// Retries after consecutive failures; nil: unlimited; 0: none.
    public var maxRetries: Int?
    /// Seconds a connection must stay up for the count to start again.
    public var resetAfter: Double = 10

    /// Longest `Retry-After` honoured, in seconds (10 minutes).
    public static let retryAfterLimit = 600.0
    /// Shortest wait between attempts (seconds), except right after a long-lived connection.
    public static let minimumDelay = 0.01

    /// Retries made since the count last started.
    public private(set) var retries = 0
    /// The next retry goes at once (a connection that was up long enough just ended).
    private var immediate = false

    public init(baseDelay: Double = 0.5, maxDelay: Double = 30, maxRetries: Int? = nil, resetAfter: Double = 10) {
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxRetries = maxRetries
        self.resetAfter = resetAfter
    }

    /// An open connection ended after `upFor` seconds.
    public mutating func connectionEnded(upFor seconds: Double) {
        if seconds >= resetAfter {
            retries = 0
            immediate = true
        }
    }

    /// Upper bound of retry `n`'s jittered wait, in seconds.
    public func ceiling(forRetry n: Int) -> Double {
        let doubling = n >= 62 ? Double.infinity : baseDelay * Double(UInt64(1) << UInt64(n))
        return max(Self.minimumDelay, min(maxDelay, doubling))
    }

    /// The wait before the next attempt, in seconds, or nil when the retries are spent.
    /// - Parameter retryAfter: the server's Retry-After, in seconds.
    public mutating func nextDelay(retryAfter: Double? = nil, jitter: inout some JitterSource) -> Double? {
        if let maxRetries, retries >= maxRetries { return nil }
        var delay: Double
        if immediate {
            delay = 0
        } else {
            delay = max(Self.minimumDelay, jitter.nextUnit() * ceiling(forRetry: retries))
        }
        immediate = false
        if let retryAfter { delay = max(delay, min(retryAfter, Self.retryAfterLimit)) }
        retries += 1
        return delay
    }
}
