import WebSocketCore
import WebSocketTransport

/// What is known of an accepted client once its opening handshake is done: what a mode
/// (echo, broadcast, a child process per connection) needs to serve it and to describe it.
public struct ClientInfo: Sendable {
    /// Numbered from 1 in the order handshakes completed, per server.
    public let id: Int
    /// The request as accepted (path, query, headers, offers).
    public let request: HandshakeRequest
    /// "ip:port" of the client, or the socket path for a Unix listener.
    public let remoteAddress: String
    /// "ip:port" the client connected to, or the socket path.
    public let localAddress: String
    /// Whether the connection is TLS.
    public let isSecure: Bool
    /// The verified client certificate's subject under mutual TLS, else nil.
    public let clientCertificateSubject: String?
    /// The subprotocol selected (nil: none).
    public let subprotocol: String?
    /// permessage-deflate as agreed: the 101's answer and what it means for us (nil: none).
    public var deflate: (response: ExtensionOffer, configuration: DeflateConfiguration?)? = nil
    /// The TLS version and cipher ("TLSv1.3 TLS_AES_256_GCM_SHA384"), nil without TLS.
    public var tlsSummary: String? = nil
}

/// What a server does to every client, whatever its mode (the CLI's --send, --idle-timeout,
/// --timeout and -n with --echo, --broadcast and --exec).
public struct ClientLimits: Sendable, Equatable {
    /// Text messages sent to each client as soon as its handshake is done.
    public var greeting: [[UInt8]] = []
    /// Seconds without a data message either way, after which the client is closed with
    /// 1000 (checked at this interval: the close comes between one and two of them after
    /// the last message sent to it, exactly one after the last received).
    public var idleTimeout: Double?
    /// Seconds a client may stay connected; then it is closed with 1000.
    public var timeLimit: Double?
    /// The client is closed with 1000 after it sent this many messages.
    public var maximumMessages: Int?

    public init() {}
}

/// One accepted client: its facts and its driver, between the server and the mode's
/// handler (the driver's events go to `handler`; its ending also to the server).
public final class ServerConnection: ConnectionDelegate {
    public let info: ClientInfo
    /// The driver, until the connection ends.
    public private(set) var driver: ConnectionDriver?
    /// The mode's per-connection delegate; may be shared by every connection (it gets the
    /// driver with each event).
    public var handler: ConnectionDelegate?
    private weak var server: ServerDriver?

    init(info: ClientInfo, server: ServerDriver) {
        self.info = info
        self.server = server
    }

    private var limits = ClientLimits()
    /// Data messages and their payload bytes received from the client (the metrics).
    public private(set) var messagesReceived: UInt64 = 0
    public private(set) var bytesReceived: UInt64 = 0
    private var received = 0
    private var countsMessages = false
    private var lastActivity = Instant.now()
    private var sentAtCheck: UInt64 = 0
    private var timers: [EventLoop.Timer] = []

    func start(_ driver: ConnectionDriver, limits: ClientLimits) {
        self.driver = driver
        self.limits = limits
        countsMessages = limits.idleTimeout != nil || limits.maximumMessages != nil
        for text in limits.greeting { driver.send(.text, bytes: text) }
        sentAtCheck = driver.messagesSent
        driver.start()
        guard let loop = server?.loop else { return }
        if let seconds = limits.timeLimit {
            let timer = loop.timer { [weak self] in self?.driver?.close(ClosePayload(code: .normalClosure)) }
            loop.arm(timer, at: Instant.now().adding(seconds: seconds))
            timers.append(timer)
        }
        if let idle = limits.idleTimeout {
            let timer = loop.timer { [weak self] in self?.checkIdle(idle) }
            idleTimer = timer
            loop.arm(timer, at: lastActivity.adding(seconds: idle))
            timers.append(timer)
        }
    }

    private var idleTimer: EventLoop.Timer?

    private func checkIdle(_ idle: Double) {
        guard let driver, let idleTimer, let loop = server?.loop, driver.canSendData else { return }
        let now = Instant.now()
        if driver.messagesSent != sentAtCheck {
            sentAtCheck = driver.messagesSent
            lastActivity = now
        }
        if now.seconds(since: lastActivity) >= idle {
            driver.close(ClosePayload(code: .normalClosure))
        } else {
            loop.arm(idleTimer, at: lastActivity.adding(seconds: idle))
        }
    }

    /// After the handler saw the message: the idle clock and -n.
    private func countMessage(_ driver: ConnectionDriver) {
        if limits.idleTimeout != nil { lastActivity = .now() }
        received += 1
        if let limit = limits.maximumMessages, received == limit { driver.close(ClosePayload(code: .normalClosure)) }
    }

    /// -n reached: messages that came in the same read as the last one counted are not
    /// the handler's (a broadcast would write them to stdout).
    private var pastLimit: Bool { limits.maximumMessages.map { received >= $0 } ?? false }

    public func connection(_ c: ConnectionDriver, didStartMessage kind: MessageKind) {
        if !pastLimit { handler?.connection(c, didStartMessage: kind) }
    }
    public func connection(_ c: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {
        bytesReceived &+= UInt64(count)
        if !pastLimit { handler?.connection(c, didReceive: bytes, count: count, in: buffer) }
    }
    public func connectionDidEndMessage(_ c: ConnectionDriver) {
        messagesReceived &+= 1
        guard !pastLimit else { return }
        handler?.connectionDidEndMessage(c)
        if countsMessages { countMessage(c) }
    }
    public func connection(_ c: ConnectionDriver, didReceivePing payload: [UInt8]) { handler?.connection(c, didReceivePing: payload) }
    public func connection(_ c: ConnectionDriver, didReceivePong payload: [UInt8], roundTrip: Double?) {
        handler?.connection(c, didReceivePong: payload, roundTrip: roundTrip)
    }
    public func connection(_ c: ConnectionDriver, didReceiveClose payload: ClosePayload) { handler?.connection(c, didReceiveClose: payload) }
    public func connection(_ c: ConnectionDriver, didFail error: ReceiveError) { handler?.connection(c, didFail: error) }
    public func connectionDidProcessInput(_ c: ConnectionDriver) { handler?.connectionDidProcessInput(c) }
    public func connectionWillReleaseReceiveBuffer(_ c: ConnectionDriver) { handler?.connectionWillReleaseReceiveBuffer(c) }
    public func connection(_ c: ConnectionDriver, note: ConnectionNote) { handler?.connection(c, note: note) }
    public func connectionHasRoom(_ c: ConnectionDriver) { handler?.connectionHasRoom(c) }
    public func connection(_ c: ConnectionDriver, didEnd ending: ConnectionEnding) {
        handler?.connection(c, didEnd: ending)
        if let loop = server?.loop { for timer in timers { loop.arm(timer, at: nil) } }
        timers = []
        handler = nil
        driver = nil
        server?.connectionEnded(self, c, ending)
    }
}
