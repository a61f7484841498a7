import WebSocketTransport

/// Keepalive pings (RFC 6455 §5.5.2): when to send the next one, which are unanswered,
/// and whether one has waited longer than the timeout. A ping's timeout starts when its
/// bytes have actually been written to the socket, not when it was queued behind a
/// backlog of data, and it stops while the owner has paused reading (the Pong may wait
/// behind data not read yet).
struct PingTracker {
    let interval: Double?
    let timeout: Double?
    private var nextPingAt: Instant?
    private var counter: UInt64 = 0
    /// `countsFrom`: where the timeout counts from (written, or reading last resumed).
    private var outstanding: [(payload: [UInt8], endOffset: UInt64, writtenAt: Instant?, countsFrom: Instant?)] = []
    private(set) var lastRoundTrip: Double?

    init(interval: Double?, timeout: Double?) {
        self.interval = interval
        self.timeout = timeout
    }

    mutating func start(at now: Instant) {
        if let interval { nextPingAt = now.adding(seconds: interval) }
    }

    func pingDue(at now: Instant) -> Bool {
        guard let next = nextPingAt else { return false }
        return now >= next
    }

    /// 8 bytes that identify the next ping.
    mutating func nextPayload() -> [UInt8] {
        counter += 1
        return (0..<8).map { UInt8(truncatingIfNeeded: counter >> (56 - 8 * UInt64($0))) }
    }

    /// A ping was queued; its last byte is at `endOffset` of the outbound stream.
    mutating func queued(_ payload: [UInt8], endingAt endOffset: UInt64, at now: Instant) {
        outstanding.append((payload, endOffset, nil, nil))
        if let interval { nextPingAt = now.adding(seconds: interval) }
    }

    /// The outbound stream has been written up to `offset`.
    mutating func written(upTo offset: UInt64, at now: Instant) {
        for i in outstanding.indices where outstanding[i].writtenAt == nil && outstanding[i].endOffset <= offset {
            outstanding[i].writtenAt = now
            outstanding[i].countsFrom = now
        }
    }

    /// Reading is paused (or has just resumed): a written ping's timeout starts over now.
    mutating func readingWaited(at now: Instant) {
        for i in outstanding.indices where outstanding[i].countsFrom != nil {
            outstanding[i].countsFrom = now
        }
    }

    /// A pong arrived: returns the round trip if it answers one of our pings (which also
    /// answers every older one, §5.5.3), nil for an unsolicited pong.
    mutating func pongReceived(_ payload: [UInt8], at now: Instant) -> Double? {
        guard let index = outstanding.firstIndex(where: { $0.payload == payload }) else { return nil }
        let rtt = outstanding[index].writtenAt.map { now.seconds(since: $0) } ?? 0
        outstanding.removeFirst(index + 1)
        lastRoundTrip = rtt
        return rtt
    }

    /// The timeout in seconds if the oldest written ping has waited past it.
    func overdue(at now: Instant) -> Double? {
        guard let timeout, let sent = outstanding.first?.countsFrom else { return nil }
        return now.seconds(since: sent) >= timeout ? timeout : nil
    }

    /// The next moment a timer needs attention: the next ping or a pong's deadline.
    var nextDeadline: Instant? {
        guard let due = pongDeadline else { return nextPingAt }
        return nextPingAt.map { min($0, due) } ?? due
    }

    /// When the oldest written ping's pong is overdue (with a timeout).
    var pongDeadline: Instant? {
        guard let timeout, let sent = outstanding.first(where: { $0.countsFrom != nil })?.countsFrom else { return nil }
        return sent.adding(seconds: timeout)
    }
}
