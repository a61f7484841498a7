import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// Redis pub/sub as the bus of --broadcast: a subscriber connection (SUBSCRIBE CHANNEL; a
/// subscribed connection can issue nothing else) and a publisher connection (PUBLISH,
/// answered with the number of receivers), both on the engine's loop, AUTH first when a
/// password is set. The bus is up once both are. When either ends, both are closed and
/// dialed again (`BusSession`); pub/sub is at-most-once, so what was published while this
/// process was away is gone, and `lost`/`restored` say when.
public final class RedisBus: BusSession {
    private var subscriber: Side
    private var publisher: Side
    /// PUBLISHes written and answered on the current publisher connection.
    private var published = 0
    private var confirmed = 0
    /// The subscriber's PING for `whenDelivered` is on its way.
    private var pingSent = false

    /// One of the two connections, with its parser and what it waits for.
    private final class Side {
        let line: BusLine
        var parser: RESPParser
        var ready = false
        /// Replies still due, oldest first.
        var pending: [Command] = []
        var pendingStart = 0
        /// `ping`: the handshake's (publisher) or `whenDelivered`'s (subscriber); `keepalive`: --bus-ping's.
        enum Command { case auth, ping, subscribe, publish, keepalive }
        init(line: BusLine, parser: RESPParser) { self.line = line; self.parser = parser }
        func reset(_ maximum: Int) { parser = RESPParser(maximumBulk: maximum); ready = false; pending = []; pendingStart = 0 }
        var next: Command? { pendingStart < pending.count ? pending[pendingStart] : nil }
        func take() -> Command? {
            guard let next else { return nil }
            pendingStart += 1
            if pendingStart > 1024 { pending.removeFirst(pendingStart); pendingStart = 0 }
            return next
        }
    }

    public override init(loop: EventLoop, settings: Settings) {
        let maximum = settings.maximumMessage &+ 1
        subscriber = Side(line: BusLine(loop: loop, outboundLimit: 1 << 20), parser: RESPParser(maximumBulk: maximum))
        publisher = Side(line: BusLine(loop: loop, outboundLimit: settings.outboundLimit + maximum + 1024),
                         parser: RESPParser(maximumBulk: 1024))
        super.init(loop: loop, settings: settings)
        pace(subscriber.line)
        for side in [subscriber, publisher] {
            side.line.onOpen = { [unowned self, unowned side] in opened(side) }
            side.line.onBytes = { [unowned self, unowned side] bytes in received(bytes, on: side) }
            side.line.onEnd = { [unowned self] why in lost(.line(why)) }
            keepAlive(side.line) { [unowned self, unowned side] in keepalive(side) }
        }
        publisher.line.onRoom = { [unowned self] in if isUp { onRoom?() } }
    }

    override var queuedForPublishing: Int { publisher.line.queuedBytes }
    override var subscribingLine: BusLine { subscriber.line }

    public override func publish(_ message: [UInt8], to channel: [UInt8]) {
        guard isUp else { return }
        published += 1
        publisher.pending.append(.publish)
        publisher.line.send(RESPCommand.encode([Array("PUBLISH".utf8), channel, message]))
    }

    /// Redis queues a PUBLISH to every subscriber before it answers it: so, once every
    /// PUBLISH is answered, a PING on the subscriber connection is answered behind them.
    override func markDelivery() {
        guard isWaitingForDelivery, !pingSent, confirmed == published else { return }
        pingSent = true
        subscriber.pending.append(.ping)
        subscriber.line.send(RESPCommand.encode("PING"))
    }

    override func openConnections() {
        for side in [subscriber, publisher] {
            side.reset(side === subscriber ? settings.maximumMessage &+ 1 : 1024)
            side.line.open(settings.dial)
        }
    }

    override func closeConnections() {
        subscriber.line.close()
        publisher.line.close()
        pingSent = false
    }

    private func lost(_ why: BusLoss) {
        let unconfirmed = published - confirmed
        published = 0
        confirmed = 0
        down(why, unconfirmed: unconfirmed)
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

    /// A quiet connection's PING (RESP2 answers it on a subscribed connection too, as a
    /// "pong" push); none before the handshake is answered, whose replies are due anyway.
    private func keepalive(_ side: Side) {
        guard side.ready else { return }
        side.pending.append(.keepalive)
        side.line.send(RESPCommand.encode("PING"))
    }

    private func becameReady(_ side: Side) {
        side.ready = true
        if subscriber.ready && publisher.ready { becameUp() }
    }

    // MARK: - Replies

    private func received(_ bytes: UnsafeRawBufferPointer, on side: Side) {
        var values: [RESPValue] = []
        do throws(RESPError) {
            try side.parser.consume(bytes, into: &values)
        } catch {
            return lost(.notRESP(error))
        }
        for value in values {
            guard side.line.isOpen else { return }
            if side === subscriber { subscriberGot(value) } else { publisherGot(value) }
        }
    }

    /// Whether an error reply is about credentials: AUTH refused, or a bus that wants them.
    static func isAuthError(_ text: String) -> Bool {
        ["WRONGPASS", "NOAUTH", "NOPERM", "ERR invalid password", "ERR AUTH", "ERR Client sent AUTH"].contains { text.hasPrefix($0) }
    }

    private func subscriberGot(_ value: RESPValue) {
        if case .error = value, let text = value.text {
            if RedisBus.isAuthError(text) || subscriber.next == .auth { return refuse(text) }
            return lost(.unexpected(text))
        }
        if case .array(let items) = value, items.count == 3, let kind = items[0].text {
            switch kind {
            case "message":
                switch items[2] {
                case .bulk(let message): return deliver(message)
                case .oversized(let length): return drop(.oversized(length))
                default: break
                }
            case "subscribe":
                _ = subscriber.take()
                return becameReady(subscriber)
            default: break
            }
        }
        if case .array(let items) = value, items.count == 2, items[0].text == "pong" {
            switch subscriber.take() {
            case .ping?:
                pingSent = false
                return reachedDeliveryMark()
            case .keepalive?: return
            default: break
            }
        }
        if case .simple = value, subscriber.take() == .auth { return }  // +OK to AUTH
        lost(.unexpected("unexpected reply on the subscriber connection"))
    }

    private func publisherGot(_ value: RESPValue) {
        let command = publisher.take()
        if case .error = value, let text = value.text {
            if RedisBus.isAuthError(text) || command == .auth { return refuse(text) }
            return lost(.unexpected(text))
        }
        switch (command, value) {
        case (.auth?, .simple): return
        case (.ping?, .simple): return becameReady(publisher)
        case (.keepalive?, .simple): return
        case (.publish?, .integer):
            confirmed += 1
            markDelivery()
        default:
            lost(.unexpected("unexpected reply on the publisher connection"))
        }
    }
}
