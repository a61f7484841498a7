import WebSocketCore
import WebSocketTransport

/// `--rate-limit`, `--byte-rate` and `--rate-limit-action`: how fast one client may send.
public struct MessageRateSettings: Sendable, Equatable {
    /// Data messages per second (nil: no limit).
    public var messages: RateLimit?
    /// Payload bytes per second (nil: no limit).
    public var bytes: RateLimit?
    public var action: Action = .pause

    public enum Action: Sendable, Equatable {
        /// Stop reading the connection until it is under the rate: nothing is dropped, TCP
        /// pushes back, and its Pings and Close wait too.
        case pause
        /// Close with 1008 (policy violation) at the first message over the rate.
        case close
    }

    public init(messages: RateLimit? = nil, bytes: RateLimit? = nil, action: Action = .pause) {
        self.messages = messages
        self.bytes = bytes
        self.action = action
    }
}

/// What a `RateKeeper` did, for the metrics.
public enum RateEvent: Sendable, Equatable {
    case paused, closed
}

/// One connection's message and byte buckets. Made only when a rate is set: a server
/// without one holds none. Under `.pause` the driver is throttled after the message (or
/// the piece of one) that emptied a bucket, and a timer lets it read again when the
/// bucket holds enough; under `.close` a message that finds the bucket empty closes the
/// connection with 1008, and nothing more of it reaches the owner.
public final class RateKeeper {
    public let settings: MessageRateSettings
    private var messages: TokenBucket?
    private var bytes: TokenBucket?
    private let loop: EventLoop
    /// Made at the first pause.
    private var timer: EventLoop.Timer?
    private var driver: ConnectionDriver?
    /// Closed for going over the rate: the rest is not the owner's.
    public private(set) var violated = false
    public var onEvent: (RateEvent) -> Void = { _ in }

    public init(_ settings: MessageRateSettings, loop: EventLoop, now: Instant = .now()) {
        self.settings = settings
        self.loop = loop
        let seconds = RateKeeper.seconds(now)
        messages = settings.messages.map { TokenBucket($0, now: seconds) }
        bytes = settings.bytes.map { TokenBucket($0, now: seconds) }
    }

    public func attach(_ driver: ConnectionDriver) { self.driver = driver }

    /// The connection ended: no more timer, no driver.
    public func cancel() {
        if let timer { loop.arm(timer, at: nil) }
        driver = nil
    }

    /// A message starts: under `.close` it takes its token now (false: over the rate, closed).
    @inline(__always)
    public func messageStarted() -> Bool {
        guard settings.action == .close, messages != nil else { return true }
        let now = RateKeeper.seconds(.now())
        messages!.take(1, now: now)
        return messages!.tokens >= -TokenBucket.slack || violate()
    }

    /// `count` payload bytes came (false under `.close`: over the rate, closed).
    @inline(__always)
    public func received(_ count: Int) -> Bool {
        guard bytes != nil else { return true }
        let now = RateKeeper.seconds(.now())
        bytes!.take(Double(count), now: now)
        guard bytes!.tokens < 0 else { return true }
        if settings.action == .close { return violate() }
        pause(now: now)
        return true
    }

    /// A message ended: under `.pause` it takes its token, and reading stops while the
    /// next one would be over the rate.
    @inline(__always)
    public func messageEnded() {
        guard settings.action == .pause, messages != nil else { return }
        let now = RateKeeper.seconds(.now())
        messages!.take(1, now: now)
        if messages!.tokens < 1 { pause(now: now) }
    }

    /// Stops reading until both buckets admit more: a whole message, a byte.
    private func pause(now: Double) {
        let seconds = max(messages.map { $0.wait(until: 1, now: now) } ?? 0, bytes.map { $0.wait(until: 0, now: now) } ?? 0)
        guard let driver, seconds > 0 else { return }
        let timer = self.timer ?? loop.timer { [unowned self] in self.driver?.unthrottle() }
        self.timer = timer
        if !driver.throttled { onEvent(.paused) }
        driver.throttle()
        loop.arm(timer, at: Instant.now().adding(seconds: seconds))
    }

    private func violate() -> Bool {
        if !violated {
            violated = true
            onEvent(.closed)
            driver?.close(ClosePayload(code: .policyViolation, reason: Array("over the rate limit".utf8)))
        }
        return false
    }

    static func seconds(_ instant: Instant) -> Double { Double(instant.nanoseconds) / 1e9 }
}
