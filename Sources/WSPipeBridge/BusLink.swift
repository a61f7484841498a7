import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport
import WSPipeBus

/// --bus URL and what goes with it (ServeConfiguration.bus).
public struct BusServing: Sendable {
    public var address: BusAddress
    /// --bus-inbound CHANNEL: clients' messages are also published there.
    public var inbound: String?
    /// rediss://: --cacert, -k.
    public var caFile: String?
    public var insecure = false
    /// --bus-ping SECS: the keepalive's interval and timeout; nil (--bus-ping 0): none.
    public var pingInterval: Double? = BusKeepalive.defaultInterval

    public init(address: BusAddress) { self.address = address }
}

/// The stdio face's side of --bus (BroadcastBridge's hook): stdin messages are published on
/// the bus instead of going to the clients (the framer sends into this sink), and what the
/// bus delivers goes to the clients through `BroadcastMode`, so every process's clients get
/// the bus's one order. Words the bus's events: warnings and -v lines on stderr, and with
/// --jsonl `bus_lost`/`bus_restored` objects on stdout (in order with the messages).
final class BusLink: MessageSink {
    /// The "type" values of its --jsonl events; stdin skips them, so output replays as input.
    static let eventTypes: Set<String> = ["bus_lost", "bus_restored"]

    private let bus: BusSession
    private let mode: BroadcastMode
    private let log: Diagnostics
    private let inbound: [UInt8]?
    private let jsonLines: Bool
    /// A --jsonl event line for stdout.
    var writeEvent: (([UInt8]) -> Void)?
    /// `hasRoom` may have become true (the bus is up again, or took bytes).
    var onRoom: (() -> Void)?
    /// The bus refused our credentials: the run ends (exit 5).
    var onRefused: ((Failure) -> Void)?
    private var pausedForClients = false

    init(_ serving: BusServing, loop: EventLoop, mode: BroadcastMode, maximumMessage: UInt64, jsonLines: Bool, log: Diagnostics) {
        let address = serving.address
        var tls: TLSOptions?
        if address.tls {
            let isIP = IPAddress(Substring(address.host)) != nil
            let plain = address.kind == .nats ? "nats://" : "redis://"
            tls = TLSOptions(serverName: address.host, serverNameIsIP: isIP, verifyPeer: !serving.insecure, caFile: serving.caFile,
                             plainPeerHint: " (is the bus plain? use \(plain) for it)")
        }
        var dial = BusDial(host: address.host, port: address.port, tls: tls, names: commandLineNames)
        dial.lineBeforeTLS = address.kind == .nats && address.tls
        let maximum = Int(min(maximumMessage, UInt64(Int.max - 1)))
        var settings = BusSession.Settings(address: address, dial: dial, maximumMessage: maximum, outboundLimit: mode.queueLimit)
        settings.pingInterval = serving.pingInterval
        switch address.kind {
        case .redis: bus = RedisBus(loop: loop, settings: settings)
        case .nats: bus = NATSBus(loop: loop, settings: settings)
        }
        self.mode = mode
        self.log = log
        self.jsonLines = jsonLines
        inbound = serving.inbound.map { Array($0.utf8) }
        bus.onMessage = { [unowned self] kind, message, start in deliver(kind, message, start) }
        bus.onDrop = { [maximum] drop in
            switch drop {
            case .oversized(let length):
                log.warning("a bus message of \(length) bytes is over --max-message-size (\(maximum) bytes): dropped")
            case .notUTF8:
                log.warning("a bus message tagged text (0x01) is not UTF-8: dropped")
            }
        }
        bus.onEvent = { [unowned self] event in report(event) }
        bus.onRoom = { [unowned self] in onRoom?() }
        mode.busLosses = 0
    }

    var hasRoom: Bool { bus.hasRoom }

    func start() {
        log.event("bus \(bus.address): connecting" + (bus.address.kind == .redis ? " (subscriber and publisher)" : ""))
        bus.start()
    }

    func stop() { bus.stop() }

    /// The clients may take more: read the channel again.
    func clientsHaveRoom() {
        guard pausedForClients, mode.hasRoom else { return }
        pausedForClients = false
        bus.readingPaused = false
    }

    // MARK: stdin -> bus

    func send(_ opcode: Opcode, fin: Bool, _ payload: UnsafeMutableRawPointer?, count: Int, in owner: ByteBuffer?) {
        bus.publish(BusEnvelope.encode(opcode == .binary ? .binary : .text, UnsafeRawBufferPointer(start: payload, count: count)))
    }

    func send(_ opcode: Opcode, fin: Bool, bytes: [UInt8]) {
        bytes.withUnsafeBytes { bus.publish(BusEnvelope.encode(opcode == .binary ? .binary : .text, $0)) }
    }

    // MARK: bus -> clients

    private func deliver(_ kind: MessageKind, _ message: [UInt8], _ start: Int) {
        var message = message
        message.withUnsafeMutableBytes { raw in
            mode.send(kind.opcode, fin: true, raw.baseAddress.map { $0 + start }, count: raw.count - start, in: nil)
        }
        // Every client far behind: the channel waits in the bus (which drops us at its limit).
        if !mode.hasRoom && !pausedForClients {
            pausedForClients = true
            bus.readingPaused = true
        }
    }

    // MARK: clients -> bus

    /// A client's message (--bus-inbound): the raw message in the bus's envelope, or with
    /// --jsonl its object naming the client and this process.
    func clientMessage(_ info: ClientInfo, _ kind: MessageKind, _ payload: [UInt8]) {
        guard let inbound else { return }
        if jsonLines {
            // --jsonl's object for the message (as stdout has it, without "ts"), and our process.
            var object = OutputAssembler.jsonLine(kind, payload, client: info.id, timestamps: false, reserve: payload.count)
            if object.last == UInt8(ascii: "}") { object.removeLast(); object += Array(",\"process\":\(getpid())}".utf8) }
            bus.publish(BusEnvelope.encode(.text, object.withUnsafeBytes { UnsafeRawBufferPointer($0) }), to: inbound)
        } else {
            payload.withUnsafeBytes { bus.publish(BusEnvelope.encode(kind, $0), to: inbound) }
        }
    }

    // MARK: events

    private func report(_ event: BusEvent) {
        let now = MetricsExposition.wallClock()
        switch event {
        case .connected:
            log.event("bus \(bus.address): subscribed")
        case .unreachable(let why, let delay, let first):
            let line = "bus \(bus.address) not reachable: \(describe(why)); retrying in \(formatSeconds(delay)) s"
            if first { log.warning(line + " (clients are accepted meanwhile)") } else { log.event(line) }
        case .lost(let why, let unconfirmed):
            mode.busLosses = UInt64(bus.losses)
            let unsure = unconfirmed > 0 ? "; \(unconfirmed) message(s) published may not have reached it" : ""
            log.warning("bus \(bus.address) lost: \(describe(why))\(unsure); the clients stay, stdin waits, "
                        + "messages published meanwhile are not delivered here")
            writeJSON("bus_lost", at: now, [("reason", .string(describe(why))), ("unconfirmed", .number(unconfirmed))])
        case .restored(let seconds):
            log.warning("bus \(bus.address) restored after \(formatSeconds(seconds)) s: subscribed again")
            writeJSON("bus_restored", at: now, [("down_seconds", .seconds(seconds))])
        case .refused(let reply):
            onRefused?(.busRefused(bus: bus.address.description, reply: reply))
        }
    }

    private enum Field { case string(String), number(Int), seconds(Double) }

    private func writeJSON(_ type: String, at time: Double, _ fields: [(String, Field)]) {
        guard jsonLines else { return }
        var out = Array("{\"type\":\"\(type)\",\"ts\":\(formatSeconds(time))".utf8)
        for (name, value) in fields {
            out += Array(",\"\(name)\":".utf8)
            switch value {
            case .string(let text): Array(text.utf8).withUnsafeBytes { JSONWriter.appendString($0, to: &out) }
            case .number(let number): out += Array(String(number).utf8)
            case .seconds(let seconds): out += Array(formatSeconds(seconds).utf8)
            }
        }
        out += Array("}\n".utf8)
        writeEvent?(out)
    }

    private func describe(_ why: BusLoss) -> String {
        switch why {
        case .line(.dial(let error)): return error.sentence(commandLineNames)
        case .line(.endOfStream): return "the bus closed the connection"
        case .line(.failed(let failure)): return failure.description
        case .line(.tooSlow(let bytes)): return "\(ByteCount.text(UInt64(bytes))) waited for it (too slow)"
        case .line(.silent(let seconds)):
            return "nothing came from it for \(formatSeconds((seconds * 10).rounded() / 10)) s, not even an answer to PING (--bus-ping)"
        case .notRESP(let error): return "it sent bytes that are not RESP (\(error))"
        case .notNATS(let error): return "it sent bytes that are not the NATS protocol (\(error))"
        case .unexpected(let text): return "it answered \(Diagnostics.terminalSafe(text))"
        }
    }
}

extension BusLink {
    /// Calls `done` once what this process published has come back on the channel (or
    /// the bus is down): stdin's end closes the clients after its last messages.
    func whenDelivered(_ done: @escaping () -> Void) { bus.whenDelivered(done) }
}
