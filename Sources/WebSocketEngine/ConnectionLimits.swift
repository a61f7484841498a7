import WebSocketCore
import WebSocketTransport

/// What limits one connection, in every mode (the CLI's --send, -n/-1, --timeout and
/// --idle-timeout): values only; `LimitKeeper` applies them. Where modes differ, the
/// difference is a field here, not a check of the mode in code.
public struct ConnectionLimits: Sendable, Equatable {
    /// Text messages sent as soon as the connection opens, before anything else (--send).
    public var greeting: [[UInt8]] = []
    /// Seconds without a data message, after which the connection is closed with 1000;
    /// `idleClock` says what counts as one.
    public var idleTimeout: Double?
    /// Seconds the connection (or the run: `span`) may last; then it is closed with 1000.
    public var timeLimit: Double?
    /// The connection is closed with 1000 after this many messages received (the run's
    /// count, or each connection's: `span`).
    public var maximumMessages: Int?
    public var idleClock: IdleClock = .receivedAndSentCount
    public var span: Span = .connection

    /// What keeps the idle clock from running out, and while what it is checked.
    public enum IdleClock: Sendable, Equatable {
        /// Every message received (as it ends), and the driver's count of messages sent,
        /// compared at each check: the close comes exactly one idle period after the last
        /// message received and between one and two after the last sent (a mode sends from
        /// many places, none of which need report it). Checked while the connection takes
        /// data: once a close is queued, that close is the mode's ending. The server modes.
        case receivedAndSentCount
        /// The owner reports what it receives (`received`, once per read) and what it sends
        /// (`sent`, as stdin is framed): the close comes one idle period after the last
        /// message either way. Checked while the connection is open, a close queued behind
        /// the last messages included; between connections the clock waits for the next
        /// one. The stdio endpoint (the client and the stdio server).
        case bothWaysReported
    }

    /// What the time limit and the message count span.
    public enum Span: Sendable, Equatable {
        /// Each connection from its handshake: a server's client (every server mode, the
        /// stdio server per client).
        case connection
        /// The whole run from its start, connecting and reconnections included: the client
        /// (its --timeout is exit 124, also before the connection opens; -n counts across
        /// reconnections).
        case run
    }

    public init(greeting: [[UInt8]] = [], idleTimeout: Double? = nil, timeLimit: Double? = nil, maximumMessages: Int? = nil,
                idleClock: IdleClock = .receivedAndSentCount, span: Span = .connection) {
        self.greeting = greeting
        self.idleTimeout = idleTimeout
        self.timeLimit = timeLimit
        self.maximumMessages = maximumMessages
        self.idleClock = idleClock
        self.span = span
    }

    /// Whether anything is counted per message (the hot path skips the count otherwise).
    public var countsMessages: Bool { idleTimeout != nil || maximumMessages != nil }
}

/// Which timed limit is up (`LimitKeeper.onLimit`; -n is answered by `received`).
public enum LimitReason: Sendable, Equatable {
    case idle, timeLimit
}

/// The decisions of the limits, without a loop or a socket: the counts, the idle clock and
/// the deadline, each asked with the time it is (unit-tested as such).
public struct LimitState: Sendable {
    public let limits: ConnectionLimits
    /// When the run started (`span` .run: the deadline counts from it).
    public let runStart: Instant
    /// Messages received in the span (the run's, or the current connection's).
    public private(set) var received = 0
    /// The last data message either way, or the connection's opening.
    public private(set) var lastActivity: Instant
    /// The deadline of the current span, nil without a time limit (or between connections
    /// with `span` .connection).
    public private(set) var deadline: Instant?
    private var sentAtCheck: UInt64 = 0

    public init(_ limits: ConnectionLimits, runStart: Instant) {
        self.limits = limits
        self.runStart = runStart
        lastActivity = runStart
        if limits.span == .run { deadline = limits.timeLimit.map { runStart.adding(seconds: $0) } }
    }

    /// A connection opened at `now`, having sent `sent` messages so far (its greeting):
    /// the idle clock starts; with `span` .connection the count and the deadline too.
    public mutating func opened(at now: Instant, sent: UInt64) {
        lastActivity = now
        sentAtCheck = sent
        if limits.span == .connection {
            received = 0
            deadline = limits.timeLimit.map { now.adding(seconds: $0) }
        }
    }

    /// The connection ended: with `span` .connection its deadline goes with it.
    public mutating func closed() {
        if limits.span == .connection { deadline = nil }
    }

    /// `count` messages received at `now`: true when they bring the count to -n's limit or
    /// past it for the first time (the close is due).
    public mutating func received(_ count: Int, at now: Instant) -> Bool {
        let wasReached = limitReached
        received += count
        lastActivity = now
        return !wasReached && limitReached
    }

    /// A message sent at `now` (`idleClock` .bothWaysReported).
    public mutating func sent(at now: Instant) { lastActivity = now }

    /// -n's count is reached: what still arrives is past it.
    public var limitReached: Bool { limits.maximumMessages.map { received >= $0 } ?? false }

    public enum IdleVerdict: Sendable, Equatable {
        case close
        case checkAgain(at: Instant)
    }

    /// The idle check at `now`; `sent` is the driver's count of messages sent (read with
    /// `idleClock` .receivedAndSentCount).
    public mutating func idleCheck(at now: Instant, sent: UInt64) -> IdleVerdict? {
        guard let idle = limits.idleTimeout else { return nil }
        if limits.idleClock == .receivedAndSentCount && sent != sentAtCheck {
            sentAtCheck = sent
            lastActivity = now
        }
        return now.seconds(since: lastActivity) >= idle ? .close : .checkAgain(at: lastActivity.adding(seconds: idle))
    }
}
