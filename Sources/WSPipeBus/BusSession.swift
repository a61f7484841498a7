import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// What happened to the bus, for the face to word (-v lines, --jsonl events, warnings).
public enum BusEvent: Equatable, Sendable {
    /// Both connections are up and subscribed for the first time.
    case connected
    /// An attempt failed; the next one goes in `retryIn` seconds. `first`: the first
    /// attempt since the start or since the last loss.
    case unreachable(BusLoss, retryIn: Double, first: Bool)
    /// The bus was up and is not: messages published on it meanwhile will not reach this
    /// process's clients. `unconfirmed`: our PUBLISHes the bus had not answered.
    case lost(BusLoss, unconfirmed: Int)
    /// Up again after `downFor` seconds.
    case restored(downFor: Double)
    /// The bus refused our credentials (or wants some): retrying cannot help.
    case refused(String)
}

/// Why a bus connection went down.
public enum BusLoss: Equatable, Sendable {
    case line(BusLineEnd)
    /// The bus sent bytes that are not RESP.
    case notRESP(RESPError)
    /// Or not the NATS client protocol.
    case notNATS(NATSError)
    /// A reply we did not expect (an error to SUBSCRIBE or PUBLISH, say).
    case unexpected(String)
}

/// A bus message this process did not deliver.
public enum BusDrop: Equatable, Sendable {
    /// A payload over `maximumMessage`: the bus message's length.
    case oversized(Int)
    /// Tagged text (0x01) that is not UTF-8.
    case notUTF8
}

/// What every bus shares, whatever its protocol: the settings, the callbacks the face sets,
/// being up or not, the reconnection (`Backoff`: full jitter between 0.25 and 5 seconds, a
/// fresh count after 10 s up), the events of a gap, and delivering a bus message (the
/// envelope, the limit). A subclass opens and closes its connections and speaks its protocol.
public class BusSession {
    public struct Settings: Sendable {
        public var address: BusAddress
        public var dial: BusDial
        /// The largest payload delivered; a bus message longer than this and its type byte
        /// is skipped as it arrives, a shorter one over it (untagged) dropped whole.
        public var maximumMessage: Int
        /// Bytes that may wait for the publishing connection before `hasRoom` turns false
        /// (a quarter of it) or the connection is dropped (all of it, beyond one message).
        public var outboundLimit: Int
        public var backoff = Backoff(baseDelay: 0.25, maxDelay: 5, resetAfter: 10)
        /// --bus-ping: a connection silent this long gets a PING, and is lost when nothing
        /// comes within as long again (`BusKeepalive`); nil: never.
        public var pingInterval: Double? = BusKeepalive.defaultInterval

        public init(address: BusAddress, dial: BusDial, maximumMessage: Int, outboundLimit: Int = 4 << 20) {
            self.address = address
            self.dial = dial
            self.maximumMessage = maximumMessage
            self.outboundLimit = outboundLimit
        }
    }

    /// A message from the channel: its type and the bus bytes, the payload from `payloadStart`.
    public var onMessage: ((MessageKind, [UInt8], Int) -> Void)?
    public var onDrop: ((BusDrop) -> Void)?
    public var onEvent: ((BusEvent) -> Void)?
    /// `hasRoom` may have become true.
    public var onRoom: (() -> Void)?

    /// Times an up bus went down.
    public private(set) var losses = 0
    /// Messages delivered from the bus, and dropped (`BusDrop`).
    public private(set) var received = 0
    public private(set) var dropped = 0
    public private(set) var isUp = false

    let loop: EventLoop
    var settings: Settings
    /// The channel (Redis) or subject (NATS).
    let channel: [UInt8]
    private var jitter = SystemJitter()
    private lazy var retryTimer = loop.timer { [weak self] in self?.attempt() }
    private var upSince: Instant?
    private var downSince: Instant?
    private var everUp = false
    private var failedAttempts = 0
    private(set) var stopped = false
    /// `whenDelivered`'s callbacks.
    private var delivered: [() -> Void] = []

    init(loop: EventLoop, settings: Settings) {
        self.loop = loop
        self.settings = settings
        channel = Array(settings.address.channel.utf8)
    }

    /// One 64 KiB read of the channel per turn of the loop: a bus holding a backlog would
    /// otherwise pour it in faster than the clients' sockets take it (stdin, a pipe, gives
    /// what its writer wrote), and every client but the fastest would fall behind.
    func pace(_ line: BusLine) { line.readsPerTurn = 1 }

    /// Every connection of the protocol: the keepalive's interval, and its PING.
    func keepAlive(_ line: BusLine, ping: @escaping () -> Void) {
        line.keepaliveInterval = settings.pingInterval
        line.onQuiet = ping
    }

    public var address: BusAddress { settings.address }

    /// Whether a message may be published now: the bus is up and its publishing connection
    /// has less than a quarter of its limit waiting.
    public var hasRoom: Bool { isUp && queuedForPublishing < settings.outboundLimit / 4 }

    /// Stops reading the channel (this process's clients are behind): the bus buffers, and
    /// drops us at its own limit.
    public var readingPaused: Bool {
        get { subscribingLine.readingPaused }
        set { subscribingLine.readingPaused = newValue }
    }

    public func start() { attempt() }

    public func stop() {
        stopped = true
        loop.arm(retryTimer, at: nil)
        closeConnections()
        isUp = false
    }

    /// Publishes one message on the channel (the caller checked `hasRoom`).
    public func publish(_ message: [UInt8]) { publish(message, to: channel) }

    /// Publishes `message` on another channel (--bus-inbound); nothing when the bus is down.
    public func publish(_ message: [UInt8], to channel: [UInt8]) {}

    /// Calls `done` once every message published so far has come back on the channel, or
    /// at once when the bus is down (what was published is then lost).
    public func whenDelivered(_ done: @escaping () -> Void) {
        guard isUp else { return done() }
        delivered.append(done)
        markDelivery()
    }

    // MARK: - What a protocol provides

    var queuedForPublishing: Int { 0 }
    /// The connection the channel's messages come on.
    var subscribingLine: BusLine { preconditionFailure("a bus session has a subscribing line") }
    /// Opens the connections of one attempt.
    func openConnections() {}
    func closeConnections() {}
    /// Asks the bus for a sign that comes back behind what was published so far; the
    /// protocol calls `reachedDeliveryMark` when it does.
    func markDelivery() {}

    // MARK: - For the protocols

    var isWaitingForDelivery: Bool { !delivered.isEmpty }

    func reachedDeliveryMark() {
        let waiting = delivered
        delivered = []
        for done in waiting { done() }
    }

    private func attempt() {
        guard !stopped else { return }
        openConnections()
    }

    /// Every connection of the attempt is ready: the bus is up.
    func becameUp() {
        guard !isUp else { return }
        isUp = true
        upSince = .now()
        failedAttempts = 0
        if everUp, let downSince {
            onEvent?(.restored(downFor: Instant.now().seconds(since: downSince)))
        } else {
            onEvent?(.connected)
        }
        everUp = true
        downSince = nil
        onRoom?()
    }

    /// A connection ended (or failed to open): close the others, report, retry.
    /// `unconfirmed`: messages written that the bus had not answered.
    func down(_ why: BusLoss, unconfirmed: Int) {
        guard !stopped else { return }
        closeConnections()
        defer { if !delivered.isEmpty { reachedDeliveryMark() } }
        let now = Instant.now()
        if isUp {
            isUp = false
            losses += 1
            downSince = now
            if let upSince { settings.backoff.connectionEnded(upFor: now.seconds(since: upSince)) }
            onEvent?(.lost(why, unconfirmed: unconfirmed))
        } else if retryTimer.armedFor != nil {
            return  // another connection of the same attempt
        }
        if downSince == nil { downSince = now }
        let delay = settings.backoff.nextDelay(jitter: &jitter) ?? 5
        failedAttempts += 1
        onEvent?(.unreachable(why, retryIn: delay, first: failedAttempts == 1))
        loop.arm(retryTimer, at: now.adding(seconds: delay))
    }

    /// The bus refused our credentials: no retry.
    func refuse(_ text: String) {
        stop()
        onEvent?(.refused(text))
    }

    /// A message from the channel: dropped over the limit or when tagged text is not
    /// UTF-8, else given to `onMessage`.
    func deliver(_ message: [UInt8]) {
        if message.count > settings.maximumMessage && (message.first.map { $0 > BusEnvelope.binaryTag || $0 == 0 } ?? true) {
            return drop(.oversized(message.count))  // untagged: the whole message is its payload
        }
        guard let (kind, start) = BusEnvelope.decode(message) else { return drop(.notUTF8) }
        received += 1
        onMessage?(kind, message, start)
    }

    func drop(_ why: BusDrop) {
        dropped += 1
        onDrop?(why)
    }
}
