import WebSocketTransport

/// How a run of connections went: reconnects, uptime, time disconnected, round trips.
/// Times are in seconds; the caller passes the clock's readings (`Instant`).
public struct ConnectionMetrics: Equatable, Sendable {
    /// Connections after the first one.
    public private(set) var reconnects = 0
    /// Seconds connections were up, not counting the current one.
    public private(set) var pastUptime = 0.0
    /// Seconds without a connection, not counting the current gap.
    public private(set) var pastDowntime = 0.0
    private var upSince: Instant?
    private var downSince: Instant?
    private var connections = 0
    /// Round trips of keepalive pings, seconds.
    public private(set) var rttMin: Double?
    public private(set) var rttMax: Double?
    private var rttSum = 0.0
    public private(set) var rttCount = 0

    /// - Parameter start: when the run began (disconnected until the first connection).
    public init(start: Instant) {
        downSince = start
    }

    public mutating func connected(at now: Instant) {
        if let since = downSince { pastDowntime += now.seconds(since: since) }
        downSince = nil
        if connections > 0 { reconnects += 1 }
        connections += 1
        upSince = now
    }

    /// - Returns: seconds the connection that ended was up.
    @discardableResult
    public mutating func disconnected(at now: Instant) -> Double {
        guard let since = upSince else { return 0 }
        let up = now.seconds(since: since)
        pastUptime += up
        upSince = nil
        downSince = now
        return up
    }

    public mutating func roundTrip(_ seconds: Double) {
        rttMin = min(rttMin ?? seconds, seconds)
        rttMax = max(rttMax ?? seconds, seconds)
        rttSum += seconds
        rttCount += 1
    }

    public var rttAverage: Double? { rttCount == 0 ? nil : rttSum / Double(rttCount) }
    /// Seconds the current connection has been up; nil while disconnected.
    public func currentUptime(at now: Instant) -> Double? { upSince.map { now.seconds(since: $0) } }
    public func totalUptime(at now: Instant) -> Double { pastUptime + (currentUptime(at: now) ?? 0) }
    public func totalDowntime(at now: Instant) -> Double { pastDowntime + (downSince.map { now.seconds(since: $0) } ?? 0) }
}
