import WebSocketCore
import WebSocketEngine
import WebSocketTransport

/// Core NATS as the bus of --broadcast: one connection that subscribes to the subject and
/// publishes on it (CONNECT with echo, so our own messages come back to us as to every
/// subscriber), on the engine's loop. The server's INFO comes first; we answer CONNECT
/// (user and password, or the URL's password alone as a token), SUB and PING: its PONG says
/// the server took all three, and the bus is up. The server's PINGs get a PONG; ours
/// (--bus-ping) go on a quiet connection. Core NATS is at-most-once and orders messages per
/// publisher only: the clients of every process see one publisher's messages in its order,
/// not necessarily two publishers' in the same.
public final class NATSBus: BusSession {
    private let line: BusLine
    private var parser: NATSParser
    private var sawInfo = false
    /// What each PONG due answers, oldest first.
    private var pongs: [PingFor] = []
    private enum PingFor { case handshake, delivery, keepalive }
    private var published = 0
    private var markSent = false
    private static let sid = 1

    public override init(loop: EventLoop, settings: Settings) {
        line = BusLine(loop: loop, outboundLimit: settings.outboundLimit + settings.maximumMessage + 1024)
        parser = NATSParser(maximumPayload: settings.maximumMessage &+ 1)
        super.init(loop: loop, settings: settings)
        pace(line)
        line.onBytes = { [unowned self] bytes in received(bytes) }
        // Over TLS the dial read the INFO line already (it comes before the handshake).
        line.onOpen = { [unowned self] in if self.settings.dial.lineBeforeTLS { handle(.info([])) } }
        line.onEnd = { [unowned self] why in lost(.line(why)) }
        line.onRoom = { [unowned self] in if isUp { onRoom?() } }
        keepAlive(line) { [unowned self] in
            guard sawInfo else { return }  // CONNECT goes first
            pongs.append(.keepalive)
            line.send(NATSCommand.ping)
        }
    }

    override var queuedForPublishing: Int { line.queuedBytes }
    override var subscribingLine: BusLine { line }

    public override func publish(_ message: [UInt8], to subject: [UInt8]) {
        guard isUp else { return }
        published += 1
        line.send(NATSCommand.publish(subject, message))
    }

    /// The server handles a connection's operations in order and queues our echoed
    /// messages to us as it handles each PUB: a PING after them is answered behind them.
    override func markDelivery() {
        guard isWaitingForDelivery, !markSent else { return }
        markSent = true
        pongs.append(.delivery)
        line.send(NATSCommand.ping)
    }

    override func openConnections() {
        parser = NATSParser(maximumPayload: settings.maximumMessage &+ 1)
        sawInfo = false
        pongs = []
        published = 0
        markSent = false
        line.open(settings.dial)
    }

    override func closeConnections() { line.close() }

    private func lost(_ why: BusLoss) {
        // A PUB has no answer: what was written since the last PONG is unconfirmed.
        down(why, unconfirmed: published)
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        var operations: [NATSOperation] = []
        do throws(NATSError) {
            try parser.consume(bytes, into: &operations)
        } catch {
            return lost(.notNATS(error))
        }
        for operation in operations {
            guard line.isOpen else { return }
            handle(operation)
        }
    }

    private func handle(_ operation: NATSOperation) {
        switch operation {
        case .info:
            guard !sawInfo else { return }  // a later INFO updates cluster URLs: nothing for us
            sawInfo = true
            let address = settings.address
            var out = NATSCommand.connect(user: address.user, password: address.password, tls: address.tls,
                                          name: "wspipe", version: "0")
            out += NATSCommand.subscribe(channel, sid: NATSBus.sid)
            out += NATSCommand.ping
            pongs.append(.handshake)
            line.send(out)
        case .ping:
            line.send(NATSCommand.pong)
        case .pong:
            guard !pongs.isEmpty else { return }
            published = 0  // the server handled every PUB before the PING
            switch pongs.removeFirst() {
            case .handshake: becameUp()
            case .delivery:
                markSent = false
                reachedDeliveryMark()
            case .keepalive: break
            }
        case .ok:
            break
        case .error(let bytes):
            let text = String(decoding: bytes, as: UTF8.self)
            let lowered = text.lowercased()
            if lowered.contains("authorization") || lowered.contains("authentication") || lowered.contains("permissions violation") {
                return refuse(text)
            }
            lost(.unexpected("-ERR '\(text)'"))
        case .message(_, let sid, let payload):
            guard sid == Array(String(NATSBus.sid).utf8) else { return }
            deliver(payload)
        case .oversized(let length):
            drop(.oversized(length))
        }
    }
}
