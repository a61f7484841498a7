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

/// Redis pub/sub as the bus of --broadcast: a subscriber connection (SUBSCRIBE CHANNEL;
/// a subscribed connection can issue nothing else) and a publisher connection (PUBLISH,
/// answered with the number of receivers), both on the engine's loop, AUTH first when a
/// password is set. The bus is up once both are: then `hasRoom` lets the source publish.
/// When either connection ends, both are closed and dialed again after the backoff
/// (`Backoff`: full jitter between 0.25 and 5 seconds); pub/sub is at-most-once, so what
/// was published while this process was away is gone, and `lost`/`restored` say when.
public final class RedisBus {
    public struct Settings: Sendable {
        public var address: BusAddress
        public var dial: BusDial
        /// The largest payload delivered; a bus message longer than this and its type byte
        /// is skipped as it arrives, a shorter one over it (untagged) dropped whole.
        public var maximumMessage: Int
        /// Bytes that may wait for the publisher connection before `hasRoom` turns false
        /// (a quarter of it) or the connection is dropped (all of it, beyond one message).
        public var outboundLimit: Int
        public var backoff = Backoff(baseDelay: 0.25, maxDelay: 5, resetAfter: 10)

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

    private let loop: EventLoop
    private var settings: Settings
    private let channel: [UInt8]
    private var subscriber: Side
    private var publisher: Side
    private var jitter = SystemJitter()
    private lazy var retryTimer = loop.timer { [weak self] in self?.attempt() }
    private var upSince: Instant?
    private var downSince: Instant?
    private var everUp = false
    private var failedAttempts = 0
    private var stopped = false
    /// PUBLISHes written and answered on the current publisher connection.
    private var published = 0
    private var confirmed = 0
    /// `whenDelivered`'s callbacks; `pingSent`: the subscriber's PING is on its way.
    private var delivered: [() -> Void] = []
    private var pingSent = false

    /// One of the two connections, with its parser and what it waits for.
    private final class Side {
        let line: BusLine
        var parser: RESPParser
        var ready = false
        /// Replies still due, oldest first.
        var pending: [Command] = []
        var pendingStart = 0
        enum Command { case auth, ping, subscribe, publish }
        init(line: BusLine, parser: RESPParser) { self.line = line; self.parser = parser }
        func reset(_ maximum: Int) { parser = RESPParser(maximumBulk: maximum); ready = false; pending = []; pendingStart = 0 }
        func take() -> Command? {
            guard pendingStart < pending.count else { return nil }
            let next = pending[pendingStart]
            pendingStart += 1
            if pendingStart > 1024 { pending.removeFirst(pendingStart); pendingStart = 0 }
            return next
        }
    }

    public init(loop: EventLoop, settings: Settings) {
        self.loop = loop
        self.settings = settings
        channel = Array(settings.address.channel.utf8)
        let maximum = settings.maximumMessage &+ 1
        subscriber = Side(line: BusLine(loop: loop, outboundLimit: 1 << 20), parser: RESPParser(maximumBulk: maximum))
        publisher = Side(line: BusLine(loop: loop, outboundLimit: settings.outboundLimit + maximum + 1024),
                         parser: RESPParser(maximumBulk: 1024))
        for side in [subscriber, publisher] {
            side.line.onOpen = { [unowned self, unowned side] in opened(side) }
            side.line.onBytes = { [unowned self, unowned side] bytes in received(bytes, on: side) }
            side.line.onEnd = { [unowned self] why in down(.line(why)) }
        }
        publisher.line.onRoom = { [unowned self] in if isUp { onRoom?() } }
    }

    public var address: BusAddress { settings.address }

    /// Whether a message may be published now: the bus is up and the publisher's queue
    /// has less than a quarter of its limit waiting.
    public var hasRoom: Bool { isUp && publisher.line.queuedBytes < settings.outboundLimit / 4 }

    /// Stops reading the channel (this process's clients are behind): the bus buffers,
    /// and drops us at its own limit (Redis's client-output-buffer-limit pubsub).
    public var readingPaused: Bool {
        get { subscriber.line.readingPaused }
        set { subscriber.line.readingPaused = newValue }
    }

    public func start() { attempt() }

    public func stop() {
        stopped = true
        loop.arm(retryTimer, at: nil)
        subscriber.line.close()
        publisher.line.close()
        isUp = false
    }

    /// Publishes one message on the channel (the caller checked `hasRoom`).
    public func publish(_ message: [UInt8]) { publish(message, to: channel) }

    /// Publishes `message` on another channel (--bus-inbound); nothing when the bus is down.
    public func publish(_ message: [UInt8], to channel: [UInt8]) {
        guard isUp else { return }
        published += 1
        publisher.pending.append(.publish)
        publisher.line.send(RESPCommand.encode([Array("PUBLISH".utf8), channel, message]))
    }

    /// Calls `done` once every message published so far has come back on the subscriber
    /// connection, or at once when the bus is down (what was published is then lost).
    /// Redis queues a PUBLISH to every subscriber before it answers it: so, once every
    /// PUBLISH is answered, a PING on the subscriber connection is answered behind them.
    public func whenDelivered(_ done: @escaping () -> Void) {
        guard isUp else { return done() }
        delivered.append(done)
        pingIfConfirmed()
    }

    private func pingIfConfirmed() {
        guard !delivered.isEmpty, !pingSent, confirmed == published else { return }
        pingSent = true
        subscriber.pending.append(.ping)
        subscriber.line.send(RESPCommand.encode("PING"))
    }

    private func runDelivered() {
        pingSent = false
        let waiting = delivered
        delivered = []
        for done in waiting { done() }
    }

    // MARK: - Connecting

    private func attempt() {
        guard !stopped else { return }
        for side in [subscriber, publisher] {
            side.reset(side === subscriber ? settings.maximumMessage &+ 1 : 1024)
            side.line.open(settings.dial)
        }
    }

    private func opened(_ side: Side) {
        var out: [UInt8] = []
        if let password = settings.address.password {
            var arguments = [Array("AUTH".utf8)]
            if let user = settings.address.user { arguments.append(Array(user.utf8)) }
            arguments.append(Array(password.utf8))
            out += RESPCommand.encode(arguments)
            side.pending.append(.auth)
        }
        if side === subscriber {
            out += RESPCommand.encode([Array("SUBSCRIBE".utf8), channel])
            side.pending.append(.subscribe)
        } else {
            out += RESPCommand.encode("PING")  // its answer says AUTH (or none) was enough
            side.pending.append(.ping)
        }
        side.line.send(out)
    }

    private func becameReady(_ side: Side) {
        side.ready = true
        guard subscriber.ready && publisher.ready, !isUp else { return }
        isUp = true
        upSince = .now()
        failedAttempts = 0
        published = 0
        confirmed = 0
        if everUp, let downSince {
            onEvent?(.restored(downFor: Instant.now().seconds(since: downSince)))
        } else {
            onEvent?(.connected)
        }
        everUp = true
        downSince = nil
        onRoom?()
    }

    private func down(_ why: BusLoss) {
        guard !stopped else { return }
        subscriber.line.close()
        publisher.line.close()
        defer { if !delivered.isEmpty { runDelivered() } }
        let now = Instant.now()
        if isUp {
            isUp = false
            losses += 1
            downSince = now
            if let upSince { settings.backoff.connectionEnded(upFor: now.seconds(since: upSince)) }
            onEvent?(.lost(why, unconfirmed: published - confirmed))
        } else if loopIsRetrying {
            return  // the other connection of the same attempt
        }
        if downSince == nil { downSince = now }
        let delay = settings.backoff.nextDelay(jitter: &jitter) ?? 5
        failedAttempts += 1
        onEvent?(.unreachable(why, retryIn: delay, first: failedAttempts == 1))
        loop.arm(retryTimer, at: now.adding(seconds: delay))
    }

    private var loopIsRetrying: Bool { retryTimer.armedFor != nil }

    private func refuse(_ text: String) {
        stop()
        onEvent?(.refused(text))
    }

    // MARK: - Replies

    private func received(_ bytes: UnsafeRawBufferPointer, on side: Side) {
        var values: [RESPValue] = []
        do throws(RESPError) {
            try side.parser.consume(bytes, into: &values)
        } catch {
            return down(.notRESP(error))
        }
        for value in values {
            guard side.line.isOpen else { return }
            if side === subscriber { subscriberGot(value) } else { publisherGot(value) }
        }
    }

    /// Whether an error reply is about credentials: AUTH refused, or a bus that wants them.
    private static func isAuthError(_ text: String) -> Bool {
        ["WRONGPASS", "NOAUTH", "NOPERM", "ERR invalid password", "ERR AUTH", "ERR Client sent AUTH"].contains { text.hasPrefix($0) }
    }

    private func subscriberGot(_ value: RESPValue) {
        if case .error = value, let text = value.text {
            if RedisBus.isAuthError(text) || subscriber.pending.dropFirst(subscriber.pendingStart).first == .auth {
                return refuse(text)
            }
            return down(.unexpected(text))
        }
        if case .array(let items) = value, items.count == 3, let kind = items[0].text {
            switch kind {
            case "message":
                switch items[2] {
                case .bulk(let message): return deliver(message)
                case .oversized(let length):
                    dropped += 1
                    onDrop?(.oversized(length))
                    return
                default: break
                }
            case "subscribe":
                _ = subscriber.take()
                return becameReady(subscriber)
            default: break
            }
        }
        if case .array(let items) = value, items.count == 2, items[0].text == "pong" {
            if subscriber.take() == .ping { return runDelivered() }
        }
        if case .simple = value, subscriber.take() == .auth { return }  // +OK to AUTH
        down(.unexpected("unexpected reply on the subscriber connection"))
    }

    private func deliver(_ message: [UInt8]) {
        if message.count > settings.maximumMessage && (message.first.map { $0 > BusEnvelope.binaryTag || $0 == 0 } ?? true) {
            dropped += 1
            onDrop?(.oversized(message.count))  // untagged: the whole message is its payload
            return
        }
        guard let (kind, start) = BusEnvelope.decode(message) else {
            dropped += 1
            onDrop?(.notUTF8)
            return
        }
        received += 1
        onMessage?(kind, message, start)
    }

    private func publisherGot(_ value: RESPValue) {
        let command = publisher.take()
        if case .error = value, let text = value.text {
            if RedisBus.isAuthError(text) || command == .auth { return refuse(text) }
            return down(.unexpected(text))
        }
        switch (command, value) {
        case (.auth?, .simple): return
        case (.ping?, .simple): return becameReady(publisher)
        case (.publish?, .integer):
            confirmed += 1
            pingIfConfirmed()
        default:
            down(.unexpected("unexpected reply on the publisher connection"))
        }
    }
}
