import WebSocketTransport

/// --bus-ping's timing for one bus connection: after `interval` seconds without a byte from
/// the bus, a PING; if nothing at all arrives within `timeout` seconds of it, the connection
/// is dead (a NAT that forgot it, a host gone without FIN or RST: nothing else would notice
/// on a connection that only receives). Any byte counts as life (a message, a reply, the
/// server's own PING), so a connection that is busy receiving is never pinged. Pure: the
/// owner gives the time, and looks again at `deadline` with one timer.
public struct BusKeepalive: Sendable, Equatable {
    /// 30 s of silence, then 30 s for an answer: lost within a minute. Redis's own clients
    /// ping an idle subscription (go-redis every 3 s, redis-py when asked); nats.go pings
    /// every 2 minutes and gives up with 2 unanswered (4-6 minutes).
    public static let defaultInterval = 30.0

    public enum Step: Equatable, Sendable {
        /// Nothing to do before `until`.
        case wait(until: Instant)
        /// Send a PING now; look again at `until`.
        case ping(thenAt: Instant)
        /// Nothing for `silentFor` seconds, the last `timeout` of them after a PING.
        case dead(silentFor: Double)
    }

    public let interval: Double
    public let timeout: Double
    private var lastHeard: Instant
    private var pingedAt: Instant?

    /// Counting from `openedAt`: a bus that accepts the connection and then says nothing
    /// (not even to AUTH or SUBSCRIBE) is dead after `interval + timeout` too.
    public init(interval: Double, timeout: Double, openedAt: Instant) {
        self.interval = interval
        self.timeout = timeout
        lastHeard = openedAt
    }

    /// Bytes came from the bus (or wait unread: reading is paused for the clients).
    public mutating func heard(at now: Instant) {
        lastHeard = now
        pingedAt = nil
    }

    /// When `step` has something to do at the earliest.
    public var deadline: Instant {
        pingedAt.map { $0.adding(seconds: timeout) } ?? lastHeard.adding(seconds: interval)
    }

    /// What is due at `now`. Called early (the timer was armed before the last byte came),
    /// it says when to look again.
    public mutating func step(at now: Instant) -> Step {
        guard now >= deadline else { return .wait(until: deadline) }
        if pingedAt != nil { return .dead(silentFor: now.seconds(since: lastHeard)) }
        pingedAt = now
        return .ping(thenAt: deadline)
    }
}
