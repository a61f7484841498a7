import WebSocketCore
import WebSocketTransport

/// Applies `ConnectionLimits` to the connections of one owner on a loop: sends the greeting,
/// counts, arms the idle and deadline timers and tells the owner which limit is up
/// (`onLimit`); what a limit's close also does (stdin stops, exit 124) is the owner's. A
/// server's client has one for its connection; the stdio endpoint one for its run.
public final class LimitKeeper {
    public private(set) var state: LimitState
    /// Called when the idle clock or the deadline runs out (`received` answers -n itself).
    public var onLimit: (LimitReason) -> Void
    /// The connection limited now, between `attach` and `detach`.
    public private(set) var driver: ConnectionDriver?
    private let loop: EventLoop
    private var idleTimer: EventLoop.Timer?
    private var deadlineTimer: EventLoop.Timer?
    /// A server client's message and byte rates (nil: none set).
    public let rates: RateKeeper?

    public init(_ limits: ConnectionLimits, loop: EventLoop, runStart: Instant = .now(), rates: MessageRateSettings? = nil,
                onLimit: @escaping (LimitReason) -> Void) {
        self.rates = rates.map { RateKeeper($0, loop: loop, now: runStart) }
        state = LimitState(limits, runStart: runStart)
        self.loop = loop
        self.onLimit = onLimit
        if limits.timeLimit != nil {
            let timer = loop.timer { [unowned self] in self.onLimit(.timeLimit) }
            deadlineTimer = timer
            loop.arm(timer, at: state.deadline)  // nil (unarmed) until a connection with span .connection
        }
        if limits.idleTimeout != nil {
            idleTimer = loop.timer { [unowned self] in checkIdle() }
        }
    }

    public var limits: ConnectionLimits { state.limits }
    /// The current deadline (--timeout), nil without one.
    public var deadline: Instant? { state.deadline }

    /// A connection's driver, before it starts: the greeting goes first, then the idle clock
    /// (and with span .connection the count and deadline) start. Returns the greeting's
    /// messages and bytes.
    @discardableResult
    public func attach(_ driver: ConnectionDriver) -> (messages: UInt64, bytes: UInt64) {
        self.driver = driver
        rates?.attach(driver)
        var bytes: UInt64 = 0
        for text in limits.greeting {
            driver.send(.text, bytes: text)
            bytes += UInt64(text.count)
        }
        let now = Instant.now()
        state.opened(at: now, sent: driver.messagesSent)
        if let timer = deadlineTimer, limits.span == .connection { loop.arm(timer, at: state.deadline) }
        if let timer = idleTimer, let idle = limits.idleTimeout { loop.arm(timer, at: now.adding(seconds: idle)) }
        return (UInt64(limits.greeting.count), bytes)
    }

    /// The connection ended: its timers stop (span .run: the deadline runs on; the idle
    /// timer is armed again by the next `attach`).
    public func detach() {
        driver = nil
        state.closed()
        if let timer = idleTimer { loop.arm(timer, at: nil) }
        if let timer = deadlineTimer, limits.span == .connection { loop.arm(timer, at: nil) }
    }

    /// No more limits: every timer stops.
    public func cancel() {
        rates?.cancel()
        detach()
        if let timer = deadlineTimer { loop.arm(timer, at: nil) }
    }

    /// `count` messages received: true when -n's count is reached with them (the close is
    /// the caller's, after it has handled them).
    @inline(__always)
    public func received(_ count: Int = 1, at now: Instant = .now()) -> Bool { state.received(count, at: now) }

    /// A message sent (idleClock .bothWaysReported).
    public func sent() { state.sent(at: .now()) }

    /// -n's count is reached, or the connection is closed for going over its rate.
    public var limitReached: Bool { state.limitReached || rates?.violated == true }

    private func checkIdle() {
        // Between connections nothing is checked: `attach` arms the timer again.
        guard let timer = idleTimer, let driver else { return }
        let checked = limits.idleClock == .receivedAndSentCount ? driver.canSendData : driver.state == .open
        guard checked, let verdict = state.idleCheck(at: .now(), sent: driver.messagesSent) else { return }
        switch verdict {
        case .close: onLimit(.idle)
        case .checkAgain(let instant): loop.arm(timer, at: instant)
        }
    }
}
